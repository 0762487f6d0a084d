// The Lookups page: Druid's lookup API on the coordinator, relayed by the broker. The configured
// lookups (GET .../lookups/config/all) with whether every node of their tier holds their version
// (GET .../lookups/status?detailed=true), then each node's own state (GET .../lookups/nodeStatus).
// Read-only: lookups change through `strata lookups` or the coordinator's API.

import { el, errorBox, getJson } from "./api.js";

const API = "druid/coordinator/v1/lookups";

function lookupType(spec) {
  const factory = (spec && spec.lookupExtractorFactory) || {};
  const ns = factory.extractionNamespace;
  return ns && typeof ns === "object" ? `${factory.type}/${ns.type}` : String(factory.type);
}

function td(key, value, text = value, cls = "") {
  return el("td", { "data-key": key, "data-value": value === null || value === undefined ? "" : String(value), class: cls }, text);
}

function grid(id, headers, rows) {
  return el("table", { class: "grid info", id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

function configuredTable(config, status) {
  const rows = [];
  for (const tier of Object.keys(config).sort()) {
    for (const name of Object.keys(config[tier]).sort()) {
      const spec = config[tier][name];
      const state = (status[tier] || {})[name] || {};
      const pending = state.pendingNodes || [];
      const loaded = state.loaded === true;
      rows.push(el("tr", { "data-lookup": `${tier}/${name}` },
        td("tier", tier), td("name", name), td("version", spec.version), td("type", lookupType(spec)),
        td("state", loaded ? "loaded" : "pending", loaded ? "● loaded" : "● pending", loaded ? "ok" : "bad"),
        td("pendingNodes", pending.join(","), pending.join(", ") || "—")));
    }
  }
  if (!rows.length) return el("p", { class: "muted", id: "lookups-table" }, "The configuration holds no lookup.");
  return grid("lookups-table", ["Tier", "Lookup", "Version", "Type", "State", "Pending on"], rows);
}

function nodesTable(nodeStatus) {
  const rows = [];
  for (const tier of Object.keys(nodeStatus).sort()) {
    for (const node of Object.keys(nodeStatus[tier]).sort()) {
      const state = nodeStatus[tier][node] || {};
      const current = Object.keys(state.current || {}).sort();
      const toLoad = Object.entries(state.toLoad || {}).sort(([a], [b]) => a.localeCompare(b));
      const errors = toLoad.filter(([, s]) => s && s.loadError).map(([n, s]) => `${n}: ${s.loadError}`);
      rows.push(el("tr", { "data-node": node, "data-tier": tier },
        td("node", node), td("tier", tier),
        td("loaded", current.join(","), current.map((n) => `${n} ${state.current[n].version}`).join(", ") || "—"),
        td("toLoad", toLoad.map(([n]) => n).join(","), toLoad.map(([n]) => n).join(", ") || "—", toLoad.length ? "bad" : ""),
        td("toDrop", (state.toDrop || []).join(","), (state.toDrop || []).join(", ") || "—"),
        td("loadError", errors.join("; "), errors.join("; ") || "—")));
    }
  }
  if (!rows.length) return el("p", { class: "muted", id: "lookup-nodes" }, "No node has reported its lookups yet.");
  return grid("lookup-nodes", ["Node", "Tier", "Loaded (version)", "Pending", "To drop", "Load error"], rows);
}

export async function refreshLookups() {
  const host = document.querySelector("#lookups-body");
  let config;
  try {
    config = await getJson(`${API}/config/all`);
  } catch (error) {
    if (error.status === 404) {
      host.replaceChildren(el("p", { class: "muted", id: "lookups-table" }, "No lookups are configured yet."));
      return;
    }
    const text = error.status === 503 ? `No coordinator-overlord: ${error.message}` : null;
    host.replaceChildren(text ? el("p", { class: "muted", id: "lookups-table" }, text) : errorBox(error));
    return;
  }
  try {
    const [status, nodeStatus] = await Promise.all([getJson(`${API}/status?detailed=true`), getJson(`${API}/nodeStatus`)]);
    host.replaceChildren(configuredTable(config || {}, status || {}), el("h3", { text: "Nodes" }), nodesTable(nodeStatus || {}));
  } catch (error) {
    host.replaceChildren(errorBox(error));
  }
}
