// The Query page: SQL and native JSON editors, run/explain/cancel, the result as grid, chart or
// plan, the schema list and the history (kept in this browser's localStorage). INSERT and REPLACE
// go to the SQL task API and show their task until it ends; Cancel shuts it down.

import { ApiError, el, errorBox, formatNumber, newQueryId, request, sql, sqlObjects } from "./api.js";
import { renderChart } from "./chart.js";
import { createEditor, highlightJson } from "./editor.js";
import { renderGrid } from "./grid.js";
import { explainSqlTask, followTask, ingestKind, shutdownTask, submitSqlTask, taskCounters, taskPanel } from "./sql_task.js";

const HISTORY_KEY = "strata.console.history";
const HISTORY_MAX = 50;
const $ = (selector) => document.querySelector(selector);

export function loadHistory() {
  try {
    const items = JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
    return Array.isArray(items) ? items : [];
  } catch {
    return [];
  }
}

function saveHistory(items) {
  try {
    localStorage.setItem(HISTORY_KEY, JSON.stringify(items.slice(0, HISTORY_MAX)));
  } catch {
    // storage full or disabled: history is a convenience, the query already ran
  }
}

// A native query's answer as a table, whatever its type (timeseries, topN, groupBy, scan, ...).
export function flattenNative(results) {
  const rows = [];
  const push = (record) => rows.push(record);
  for (const item of Array.isArray(results) ? results : [results]) {
    if (item && Array.isArray(item.events)) { // scan
      const cols = item.columns || [];
      for (const e of item.events) push(Array.isArray(e) ? Object.fromEntries(cols.map((c, i) => [c, e[i]])) : e);
    } else if (item && item.event && typeof item.event === "object") { // groupBy v1 shape
      push({ timestamp: item.timestamp, ...item.event });
    } else if (item && Array.isArray(item.result)) { // topN, search
      for (const r of item.result) push({ timestamp: item.timestamp, ...r });
    } else if (item && item.result && typeof item.result === "object") { // timeseries, timeBoundary, ...
      push({ timestamp: item.timestamp, ...item.result });
    } else if (item && typeof item === "object" && !Array.isArray(item)) {
      push(item);
    } else {
      push({ value: item });
    }
  }
  const names = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!names.includes(k)) names.push(k);
  const columns = names.map((name) => {
    const sample = rows.find((r) => r[name] !== null && r[name] !== undefined);
    const value = sample ? sample[name] : null;
    const type = typeof value === "number" ? (Number.isInteger(value) ? "LONG" : "DOUBLE") : "STRING";
    return { name, type, sqlType: name === "timestamp" || name === "__time" ? "TIMESTAMP" : undefined };
  });
  return { columns, rows: rows.map((r) => names.map((n) => (r[n] === undefined ? null : r[n]))) };
}

function planView(result) {
  const raw = result.rows.length ? result.rows[0][0] : "[]";
  let parts;
  try {
    parts = JSON.parse(raw);
  } catch {
    return el("pre", { class: "code" }, raw);
  }
  const natives = parts.filter((p) => p.query);
  const broker = parts.filter((p) => p.broker).map((p) => p.broker);
  const block = (title, value) => el("div", { class: "plan-part" }, el("h4", { text: title }),
    el("pre", { class: "code" }, el("code", {}, highlightJson(JSON.stringify(value, null, 2)))));
  return el("div", {},
    natives.map((p, i) => (p.ingestion
      ? block(`SQL ingestion into ${p.ingestion.dataSchema.dataSource} (the task's query and ingestion spec)`, p)
      : block(`Native query ${i + 1} of ${natives.length}: ${p.query.queryType} on ${JSON.stringify(p.query.dataSource)}`, p.query))),
    broker.map((b, i) => block(`The broker's part ${broker.length > 1 ? i + 1 : ""}(run in its own engine over the native queries' rows)`, b)),
    natives.length === 0 && broker.length === 0 ? el("p", { class: "muted" }, "No native query: the statement is answered by the broker alone.") : null);
}

export function initQueryPage() {
  const state = { tab: "sql", running: null, view: "table", schemaLoaded: false };
  const sqlEditor = createEditor($("#sql-editor"), { language: "sql", onRun: () => run(false), placeholder: "SELECT … (Ctrl-Enter runs)" });
  const nativeEditor = createEditor($("#native-editor"), { language: "json", onRun: () => run(false), placeholder: '{"queryType": "timeseries", …}' });
  const status = $("#run-status");

  const setTab = (tab) => {
    state.tab = tab;
    document.querySelectorAll("[data-tab]").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
    document.querySelectorAll("[data-pane]").forEach((p) => { p.hidden = p.dataset.pane !== tab; });
    $("#explain").hidden = tab !== "sql";
  };
  document.querySelectorAll("[data-tab]").forEach((b) => b.addEventListener("click", () => setTab(b.dataset.tab)));

  const setView = (view) => {
    state.view = view;
    document.querySelectorAll("[data-view]").forEach((b) => b.classList.toggle("active", b.dataset.view === view));
    document.querySelectorAll("[data-view-pane]").forEach((p) => { p.hidden = p.dataset.viewPane !== view; });
    if (view === "chart" && state.result) renderChart($("#chart"), state.result);
  };
  document.querySelectorAll("[data-view]").forEach((b) => b.addEventListener("click", () => setView(b.dataset.view)));

  const drawHistory = () => {
    const items = loadHistory();
    $("#history").replaceChildren(...items.map((h) => el("li", {
      title: h.text, class: h.ok ? "" : "failed",
      onclick: () => { setTab(h.kind); (h.kind === "sql" ? sqlEditor : nativeEditor).setValue(h.text); },
    }, el("span", { class: "history-text", text: h.text.replace(/\s+/g, " ").slice(0, 80) }),
    el("span", { class: "muted", text: `${h.kind} · ${new Date(h.at).toLocaleTimeString()} · ${h.ok ? `${formatNumber(h.rows)} rows, ${h.ms} ms` : "failed"}` }))));
  };
  $("#history-clear").addEventListener("click", () => { saveHistory([]); drawHistory(); });

  const remember = (kind, text, ok, rows, ms) => {
    const items = loadHistory().filter((h) => !(h.kind === kind && h.text === text));
    saveHistory([{ kind, text, ok, rows, ms, at: Date.now() }, ...items]);
    drawHistory();
  };

  const showResult = (result, elapsed, explained) => {
    state.result = result;
    $("#result").hidden = false;
    $("#query-error").replaceChildren();
    renderGrid($("#grid"), $("#grid-tools"), result);
    const planTab = document.querySelector('[data-view="plan"]');
    planTab.hidden = !explained;
    if (explained) $("#plan").replaceChildren(planView(result));
    setView(explained ? "plan" : state.view === "plan" ? "table" : state.view);
    status.textContent = `${formatNumber(result.rows.length)} rows in ${elapsed} ms`;
    status.dataset.rows = String(result.rows.length);
    status.dataset.ms = String(elapsed);
  };

  // An INSERT or REPLACE: submitted as a task, shown (and polled) until it ends.
  const runTask = async (text, queryId, started) => {
    const { taskId } = await submitSqlTask(text, { queryId });
    const running = state.running;
    running.taskId = taskId;
    const panel = $("#task-panel");
    $("#result").hidden = true;
    panel.hidden = false;
    const final = await followTask(taskId, {
      onUpdate: (s) => {
        panel.replaceChildren(taskPanel(s));
        if (s.statusCode === "RUNNING" && !running.cancelling) status.textContent = `Task ${taskId} is running…`;
      },
    });
    const counters = await taskCounters(taskId);
    panel.replaceChildren(taskPanel(final, counters));
    const elapsed = Math.round(performance.now() - started);
    const ok = final.statusCode === "SUCCESS";
    const outcome = ok ? "success" : running.cancelling ? "cancelled" : "failed";
    status.textContent = ok
      ? `Task ${taskId}: ${formatNumber(counters.rows)} rows, ${formatNumber(counters.segments)} segments in ${elapsed} ms`
      : `Task ${taskId} ${outcome} after ${elapsed} ms`;
    status.dataset.task = taskId;
    status.dataset.outcome = outcome;
    if (!ok) $("#query-error").replaceChildren(errorBox(new Error(final.errorMsg || "the task failed")));
    remember("sql", text, ok, counters.rows || 0, elapsed);
  };

  const run = async (explain) => {
    if (state.running) return;
    const kind = state.tab;
    let text = (kind === "sql" ? sqlEditor : nativeEditor).value().trim();
    if (!text) return;
    if (explain && kind === "sql" && !/^\s*EXPLAIN\b/i.test(text)) text = `EXPLAIN PLAN FOR ${text}`;
    const ingest = kind === "sql" ? ingestKind(text) : null;
    const explained = ingest ? ingest === "explain" : kind === "sql" && /^\s*EXPLAIN\b/i.test(text);
    const queryId = newQueryId();
    state.running = { kind, queryId, cancelling: false, ingest };
    $("#run").disabled = true;
    $("#cancel").disabled = false;
    status.textContent = ingest && !explained ? "Submitting the task…" : "Running…";
    for (const key of ["rows", "outcome", "task"]) delete status.dataset[key];
    $("#query-error").replaceChildren();
    $("#task-panel").hidden = true;
    const started = performance.now();
    try {
      let result;
      if (ingest && !explained) {
        await runTask(text, queryId, started);
        return;
      }
      if (kind === "sql") {
        result = await (ingest ? explainSqlTask : sql)(text, { queryId });
      } else {
        let body;
        try {
          body = JSON.parse(text);
        } catch (e) {
          throw new ApiError(400, { error: "Invalid JSON", errorMessage: e.message });
        }
        body.context = { ...(body.context || {}), queryId };
        result = flattenNative((await request("druid/v2/", { method: "POST", body })).body);
      }
      const elapsed = Math.round(performance.now() - started);
      showResult(result, elapsed, explained);
      remember(kind, text, true, result.rows.length, elapsed);
    } catch (error) {
      const elapsed = Math.round(performance.now() - started);
      $("#query-error").replaceChildren(errorBox(error));
      const cancelled = error.body && (error.body.error === "Query cancelled" || error.body.category === "CANCELED");
      status.textContent = cancelled ? `Cancelled after ${elapsed} ms` : `Failed after ${elapsed} ms`;
      status.dataset.outcome = cancelled ? "cancelled" : "failed";
      remember(kind, text, false, 0, elapsed);
    } finally {
      state.running = null;
      $("#run").disabled = false;
      $("#cancel").disabled = true;
    }
  };

  // DELETE on the broker's cancel route. Between two native queries of one statement the broker
  // has none running (404), so ask again briefly until one is found or the statement ends.
  const cancel = async () => {
    const running = state.running;
    if (!running || running.cancelling) return;
    running.cancelling = true;
    status.textContent = "Cancelling…";
    if (running.ingest) { // the task's shutdown, once the task API has given its id
      for (let attempt = 0; attempt < 100 && !running.taskId && state.running === running; attempt += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      if (!running.taskId) return;
      try {
        await shutdownTask(running.taskId);
        status.textContent = `Shutting task ${running.taskId} down…`;
      } catch (e) {
        status.textContent = `Shutdown failed: ${e.message}`;
      }
      return;
    }
    const path = running.kind === "sql" ? `druid/v2/sql/${encodeURIComponent(running.queryId)}` : `druid/v2/${encodeURIComponent(running.queryId)}`;
    for (let attempt = 0; attempt < 50 && state.running === running; attempt += 1) {
      try {
        await request(path, { method: "DELETE" });
        status.textContent = "Cancel accepted by the broker…";
        return;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 404) {
          status.textContent = `Cancel failed: ${e.message}`;
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };

  $("#run").addEventListener("click", () => run(false));
  $("#explain").addEventListener("click", () => run(true));
  $("#cancel").addEventListener("click", cancel);
  drawHistory();
  return { sqlEditor, nativeEditor, loadSchema: () => loadSchema(sqlEditor, nativeEditor) };
}

async function loadSchema(sqlEditor, nativeEditor) {
  const host = $("#schema");
  try {
    const rows = await sqlObjects(
      "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid' ORDER BY TABLE_NAME, ORDINAL_POSITION");
    const columns = {};
    for (const r of rows) (columns[r.TABLE_NAME] ||= []).push({ name: r.COLUMN_NAME, type: r.DATA_TYPE });
    const tables = Object.keys(columns).sort();
    sqlEditor.setSchema({ tables, columns });
    host.replaceChildren(...tables.map((t) => el("details", { "data-table": t },
      el("summary", { text: t }),
      el("ul", {}, columns[t].map((c) => el("li", { title: c.type }, c.name, el("span", { class: "muted", text: ` ${c.type}` })))))));
    if (!tables.length) host.replaceChildren(el("p", { class: "muted" }, "No datasources yet."));
    if (!sqlEditor.value() && tables.length) {
      const t = tables.includes("wikipedia") ? "wikipedia" : tables[0];
      sqlEditor.setValue(`SELECT TIME_FLOOR(__time, 'PT1H') AS "hour", COUNT(*) AS "rows"\nFROM "${t}"\nGROUP BY 1\nORDER BY 1`);
    }
    if (!nativeEditor.value() && tables.length) {
      nativeEditor.setValue(JSON.stringify({
        queryType: "timeseries", dataSource: tables[0], granularity: "hour",
        intervals: ["1000-01-01/3000-01-01"], aggregations: [{ type: "count", name: "rows" }],
        context: { skipEmptyBuckets: true },
      }, null, 2));
    }
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}
