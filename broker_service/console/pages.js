// The cluster pages: Datasources (sys.segments through the SQL API), Servers and Ingestion (the
// broker's /status/cluster; Ingestion also the tasks of Druid's task API), Cache (the broker's
// /status/cache). Each `refresh` redraws its page.

import { el, errorBox, formatBytes, formatNumber, getJson, sqlObjects } from "./api.js";
import { tasksSection } from "./tasks.js";
import { renderTimeline } from "./timeline.js";

const $ = (selector) => document.querySelector(selector);

function table(headers, rows, attrs = {}) {
  return el("table", { class: "grid info", ...attrs },
    el("thead", {}, el("tr", {}, headers.map(([label, cls]) => el("th", { class: cls || "" }, label)))),
    el("tbody", {}, rows));
}

function cell(value, { num = false, key, raw } = {}) {
  return el("td", { class: num ? "num" : "", "data-key": key, "data-value": raw === undefined ? String(value) : String(raw) }, value);
}

function quoteIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}

export async function refreshDatasources() {
  const host = $("#datasources-body");
  try {
    const segments = await sqlObjects(
      'SELECT segment_id, datasource, "start", "end", "size", version, partition_num, num_replicas, num_rows, ' +
      "is_available, is_realtime, is_overshadowed FROM sys.segments");
    const byName = new Map();
    for (const s of segments) {
      if (!byName.has(s.datasource)) byName.set(s.datasource, []);
      byName.get(s.datasource).push(s);
    }
    const names = [...byName.keys()].sort();
    const counts = await Promise.all(names.map(async (n) => {
      try {
        return (await sqlObjects(`SELECT COUNT(*) AS "rows" FROM ${quoteIdent(n)}`))[0].rows;
      } catch {
        return null;
      }
    }));
    const rows = names.map((name, i) => {
      const segs = byName.get(name);
      const available = segs.filter((s) => Number(s.is_available)).length;
      const realtime = segs.filter((s) => Number(s.is_realtime)).length;
      const overshadowed = segs.filter((s) => Number(s.is_overshadowed)).length;
      const size = segs.reduce((sum, s) => sum + Number(s.size || 0), 0);
      const start = segs.map((s) => s.start).sort()[0];
      const end = segs.map((s) => s.end).sort().at(-1);
      const pct = segs.length ? Math.floor((1000 * available) / segs.length) / 10 : 0;
      return el("tr", { "data-datasource": name },
        cell(name, { key: "name" }),
        cell(formatNumber(counts[i]), { num: true, key: "rows", raw: counts[i] }),
        cell(formatBytes(size), { num: true, key: "size", raw: size }),
        cell(`${formatNumber(segs.length)}${overshadowed ? ` (${overshadowed} overshadowed)` : ""}`, { num: true, key: "segments", raw: segs.length }),
        cell(`${start} – ${end}`, { key: "range", raw: `${start}/${end}` }),
        cell(`${available} / ${segs.length} (${pct}%)`, { key: "availability", raw: `${available}/${segs.length}` }),
        cell(formatNumber(segs.length - realtime), { num: true, key: "historical", raw: segs.length - realtime }),
        cell(formatNumber(realtime), { num: true, key: "realtime", raw: realtime }));
    });
    const width = Math.max(host.clientWidth || 0, 900);
    const pictures = names.map((name) => el("div", { class: "timeline-box", "data-timeline": name },
      el("h3", { text: `${name}: segments by interval and version` }),
      renderTimeline(byName.get(name), width)));
    const legend = el("div", { class: "legend" },
      el("span", {}, el("i", { class: "seg-historical" }), "served by historicals"),
      el("span", {}, el("i", { class: "seg-realtime" }), "live on real-time nodes"),
      el("span", {}, el("i", { class: "seg-overshadowed" }), "overshadowed by a newer version"),
      el("span", {}, el("i", { class: "seg-unavailable" }), "not loaded anywhere"));
    host.replaceChildren(
      names.length ? table([["Datasource"], ["Rows", "num"], ["Size", "num"], ["Segments", "num"], ["Time range"],
        ["Available (loaded / known)"], ["Historical segments", "num"], ["Real-time segments", "num"]], rows, { id: "datasources-table" })
        : el("p", { class: "muted" }, "No datasource has a segment yet."),
      names.length ? legend : null,
      ...pictures);
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}

// The last reading from each broker worker process (`strata broker --workers N` answers from any).
const lastReading = new Map();

// The cluster status, with rates from the same worker's previous reading (queries/s, events/s).
async function clusterReading() {
  const now = await getJson("status/cluster");
  const before = lastReading.get(now.worker) || null;
  lastReading.set(now.worker, now);
  const seconds = before ? (now.time - before.time) / 1000 : 0;
  const previous = new Map((before ? before.servers : []).map((s) => [s.server, s]));
  const rate = (server, read) => {
    const old = previous.get(server.server);
    if (!old || seconds <= 0) return null;
    const a = read(old);
    const b = read(server);
    return a === null || b === null ? null : Math.max(0, (b - a) / seconds);
  };
  return { now, rate };
}

export async function refreshServers() {
  const host = $("#servers-body");
  try {
    const { now, rate } = await clusterReading();
    const rows = now.servers.map((s) => {
      const qps = rate(s, (x) => x.queries);
      const healthy = s.health === "healthy";
      return el("tr", { "data-server": s.server, "data-type": s.type },
        cell(s.server, { key: "server" }),
        cell(s.type, { key: "type" }),
        cell(s.tier || "—", { key: "tier", raw: s.tier }),
        cell(formatNumber(s.segments), { num: true, key: "segments", raw: s.segments }),
        cell(formatBytes(s.bytes), { num: true, key: "bytes", raw: s.bytes }),
        cell(s.maxSize ? formatBytes(s.maxSize) : "—", { num: true, key: "maxSize", raw: s.maxSize }),
        cell(qps === null ? "…" : qps.toFixed(2), { num: true, key: "qps", raw: qps }),
        cell(formatNumber(s.queries), { num: true, key: "queries", raw: s.queries }),
        el("td", { "data-key": "health", "data-value": s.health, class: healthy ? "ok" : "bad" }, healthy ? "● healthy" : `● ${s.health}`));
    });
    const own = now.servers.find((s) => s.type === "broker");
    const b = (own && own.status) || {};
    const fact = (key, label, format = formatNumber) => el("div", { class: "card", "data-card": key },
      el("b", { text: format(b[key]) }), el("span", { text: label }));
    const cards = el("div", { class: "cards" }, fact("runningQueries", "queries running now"),
      fact("queuedQueries", "queries waiting for a slot"), fact("lostSegments", "lost segments"),
      fact("uptimeSeconds", "broker uptime", formatDuration));
    host.replaceChildren(cards, table([["Server"], ["Type"], ["Tier"], ["Segments", "num"], ["Bytes", "num"], ["Max size", "num"],
      ["Queries/s", "num"], ["Queries", "num"], ["Health"]], rows, { id: "servers-table" }),
    el("p", { class: "muted" }, "Queries: the native queries the broker ran (its own row; SQL statements' included) or sent to each data node. The broker's segments are those it routes to."));
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}

function formatDuration(seconds) {
  const s = Math.floor(Number(seconds) || 0);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min`;
  if (s < 172800) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} days`;
}

function rateText(hits, misses) {
  return hits + misses ? `${((100 * hits) / (hits + misses)).toFixed(1)}%` : "—";
}

export async function refreshCache() {
  const host = $("#cache-body");
  try {
    const body = await getJson("status/cache");
    if (body.kind === "none") {
      host.replaceChildren(el("p", { "data-kind": "none" }, "The broker runs without a cache (--cache none)."));
      return;
    }
    const q = body.query;
    const result = body.resultLevel || { hits: 0, misses: 0 };
    const cards = el("div", { class: "cards" },
      el("div", { class: "card", "data-card": "kind" }, el("b", { text: body.kind }), el("span", { text: "cache kind" })),
      el("div", { class: "card", "data-card": "segment-hit-rate" }, el("b", { text: rateText(q.hits, q.misses) }), el("span", { text: "per-segment hit rate" })),
      el("div", { class: "card", "data-card": "result-hit-rate" }, el("b", { text: rateText(result.hits, result.misses) }), el("span", { text: "whole-answer hit rate" })),
      el("div", { class: "card", "data-card": "bytes" }, el("b", { text: formatBytes(body.backend.bytes) }), el("span", { text: "bytes held" })));
    const levels = [["per-segment (all levels)", "all", body.backend], ...Object.entries(body.levels || {}).map(([name, v]) => [
      name === "l1" ? "per-segment L1 (in-process LRU)" : name === "l2" ? "per-segment L2 (memcached)" : name, name, v])];
    const levelRows = levels.map(([label, key, v]) => el("tr", { "data-level": key },
      cell(label), cell(formatNumber(v.hits), { num: true, key: "hits", raw: v.hits }),
      cell(formatNumber(v.misses), { num: true, key: "misses", raw: v.misses }),
      cell(rateText(v.hits, v.misses), { num: true, key: "hitRate" }),
      cell(formatNumber(v.entries), { num: true, key: "entries", raw: v.entries }),
      cell(formatBytes(v.bytes), { num: true, key: "bytes", raw: v.bytes }),
      cell(formatNumber(v.evictions), { num: true, key: "evictions", raw: v.evictions }),
      cell(formatNumber(v.errors), { num: true, key: "errors", raw: v.errors }),
      cell(formatNumber(v.timeouts), { num: true, key: "timeouts", raw: v.timeouts })));
    levelRows.push(el("tr", { "data-level": "result" }, cell("whole answers (result level)"),
      cell(formatNumber(result.hits), { num: true, key: "hits", raw: result.hits }),
      cell(formatNumber(result.misses), { num: true, key: "misses", raw: result.misses }),
      cell(rateText(result.hits, result.misses), { num: true, key: "hitRate" }),
      ...Array.from({ length: 5 }, () => cell("—", { num: true }))));
    const breakers = Object.entries(body.breakers || {});
    host.replaceChildren(cards,
      table([["Level"], ["Hits", "num"], ["Misses", "num"], ["Hit rate", "num"], ["Entries", "num"], ["Bytes", "num"],
        ["Evictions", "num"], ["Errors", "num"], ["Timeouts", "num"]], levelRows, { id: "cache-levels" }),
      el("h3", { text: "Per-segment lookups as queries see them" }),
      table([["Hits", "num"], ["Misses", "num"], ["Shared in flight", "num"], ["Stores", "num"], ["Errors", "num"], ["Bypassed", "num"]],
        [el("tr", {}, ["hits", "misses", "shared", "puts", "errors", "bypassed"].map((k) => cell(formatNumber(q[k]), { num: true, key: k, raw: q[k] })))],
        { id: "cache-query" }),
      el("h3", { text: "memcached circuit breakers" }),
      breakers.length
        ? table([["memcached server"], ["State"], ["Trips", "num"]], breakers.map(([name, b]) => el("tr", { "data-breaker": name },
          cell(name), el("td", { class: b.state === "open" ? "bad" : "ok", "data-key": "state", "data-value": b.state }, b.state),
          cell(formatNumber(b.trips), { num: true, key: "trips", raw: b.trips }))), { id: "cache-breakers" })
        : el("p", { class: "muted", id: "cache-breakers" }, `No memcached behind this broker (cache kind ${body.kind}).`));
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}

export async function refreshIngestion() {
  const tasks = tasksSection();
  const host = $("#ingestion-body");
  try {
    const { now, rate } = await clusterReading();
    const nodes = now.servers.filter((s) => s.type === "realtime");
    const rows = nodes.map((s) => {
      const ing = (s.status && s.status.ingestion) || null;
      if (!ing) {
        return el("tr", { "data-node": s.server }, cell("—"), cell(s.server), el("td", { colspan: 8, class: "muted" }, `no ingestion status (${s.health})`));
      }
      const events = ing.events || {};
      const perSecond = rate(s, (x) => (x.status && x.status.ingestion && x.status.ingestion.events ? x.status.ingestion.events.accepted : null));
      const pending = (ing.segments || []).filter((g) => g.closed || g.published).length;
      return el("tr", { "data-datasource": ing.dataSource, "data-node": s.server },
        cell(ing.dataSource, { key: "dataSource" }), cell(s.server, { key: "node" }),
        cell(perSecond === null ? "…" : perSecond.toFixed(1), { num: true, key: "eventsPerSecond", raw: perSecond }),
        cell(formatNumber(events.accepted), { num: true, key: "accepted", raw: events.accepted }),
        cell(formatNumber(ing.rowsInMemory), { num: true, key: "rowsInMemory", raw: ing.rowsInMemory }),
        cell(formatBytes(ing.bytesInMemory), { num: true, key: "bytesInMemory", raw: ing.bytesInMemory }),
        cell(formatNumber(ing.persists), { num: true, key: "persists", raw: ing.persists }),
        cell(formatNumber(pending), { num: true, key: "pendingHandoffs", raw: pending }),
        cell(formatNumber(ing.handoffs), { num: true, key: "handoffs", raw: ing.handoffs }),
        cell(formatNumber(events.unparseable), { num: true, key: "unparseable", raw: events.unparseable }),
        cell(formatNumber(events.thrownAway), { num: true, key: "thrownAway", raw: events.thrownAway }),
        cell(ing.lastError || "—", { key: "lastError", raw: ing.lastError || "" }));
    });
    host.replaceChildren(el("h3", { text: "Tasks" }), await tasks, el("h3", { text: "Real-time nodes" }), nodes.length
      ? table([["Datasource"], ["Node"], ["Events/s", "num"], ["Events accepted", "num"], ["Rows in memory", "num"],
        ["Bytes in memory", "num"], ["Persists", "num"], ["Pending handoffs", "num"], ["Handoffs", "num"],
        ["Parse errors", "num"], ["Thrown away", "num"], ["Last error"]], rows, { id: "ingestion-table" })
      : el("p", { class: "muted" }, "No real-time node is announced."));
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}
