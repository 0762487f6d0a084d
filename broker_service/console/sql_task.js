// INSERT and REPLACE from the query editor: Druid's SQL task API (POST druid/v2/sql/task) submits
// the statement as a task, which is then followed through the task API the broker relays
// (druid/indexer/v1/task/{id}/status, then /reports for the rows read and segments published).

import { BASE, el, formatNumber, request } from "./api.js";

// The text past leading blanks, comments and `SET key = value;` statements.
function skipPreamble(text) {
  let rest = text;
  for (;;) {
    rest = rest.replace(/^\s+/, "");
    if (rest.startsWith("--")) {
      const nl = rest.indexOf("\n");
      rest = nl < 0 ? "" : rest.slice(nl + 1);
    } else if (rest.startsWith("/*")) {
      const end = rest.indexOf("*/");
      rest = end < 0 ? "" : rest.slice(end + 2);
    } else {
      const set = /^SET\s+[^;]*;/i.exec(rest);
      if (!set) return rest;
      rest = rest.slice(set[0].length);
    }
  }
}

// "run" when the editor's text is an INSERT or REPLACE, "explain" when it explains one, else null.
export function ingestKind(text) {
  let rest = skipPreamble(text);
  const explain = /^EXPLAIN\s+PLAN\s+FOR\b/i.exec(rest);
  if (explain) rest = skipPreamble(rest.slice(explain[0].length));
  if (!/^(INSERT|REPLACE)\b/i.test(rest)) return null;
  return explain ? "explain" : "run";
}

// Submits the statement; answers Druid's {taskId, state}.
export async function submitSqlTask(query, { queryId }) {
  const body = { query, context: { sqlQueryId: queryId } };
  return (await request("druid/v2/sql/task/", { method: "POST", body })).body;
}

// EXPLAIN PLAN FOR an INSERT or REPLACE, answered inline by the task API: PLAN, RESOURCES, ATTRIBUTES.
export async function explainSqlTask(query, { queryId }) {
  const body = { query, resultFormat: "array", header: true, context: { sqlQueryId: queryId } };
  const [names = [], ...rows] = (await request("druid/v2/sql/task/", { method: "POST", body })).body || [];
  return { columns: names.map((name) => ({ name, type: "STRING", sqlType: "VARCHAR" })), rows, queryId };
}

const taskPath = (id, what) => `druid/indexer/v1/task/${encodeURIComponent(id)}/${what}`;

// Polls the task's status until it completes (or `stopped()` says to give up); `onUpdate` sees
// every status read. Answers the last status.
export async function followTask(taskId, { onUpdate, stopped = () => false, every = 500 }) {
  for (;;) {
    const status = (await request(taskPath(taskId, "status"))).body.status;
    onUpdate(status);
    if (status.statusCode !== "RUNNING" || stopped()) return status;
    await new Promise((resolve) => setTimeout(resolve, every));
  }
}

export async function shutdownTask(taskId) {
  await request(taskPath(taskId, "shutdown"), { method: "POST" });
}

// Rows read and segments published, from the task's multiStageQuery report (null when absent).
export async function taskCounters(taskId) {
  try {
    const report = (await request(taskPath(taskId, "reports"))).body;
    const counters = report.multiStageQuery.payload.counters;
    return { rows: counters["0"]["0"].input0.rows[0], segments: counters["1"]["0"].segments.published };
  } catch {
    return { rows: null, segments: null };
  }
}

function link(id, what) {
  return el("a", { href: new URL(taskPath(id, what), BASE).href, target: "_blank", rel: "noopener", "data-link": what }, what);
}

// The task as a one-row table: what the task API says of it, and its counters once it has ended.
export function taskPanel(status, counters = {}) {
  const state = status.statusCode === "RUNNING" ? status.runnerStatusCode || "RUNNING" : status.statusCode;
  const cells = [
    ["Task", "id", status.id],
    ["State", "state", state],
    ["Datasource", "dataSource", status.dataSource],
    ["Rows", "rows", counters.rows],
    ["Segments", "segments", counters.segments],
    ["Duration", "duration", status.duration > 0 ? status.duration : null],
    ["Error", "errorMsg", status.errorMsg || ""],
  ];
  const show = (key, value) => (key === "rows" || key === "segments" ? formatNumber(value)
    : key === "duration" ? (value === null ? "—" : `${formatNumber(value)} ms`) : value);
  return el("table", { class: "grid info", id: "task-table" },
    el("thead", {}, el("tr", {}, cells.map(([label]) => el("th", { text: label })), el("th", {}))),
    el("tbody", {}, el("tr", { "data-task": status.id, "data-state": state },
      cells.map(([, key, value]) => el("td", {
        "data-key": key, "data-value": value === null || value === undefined ? "" : String(value),
        class: key === "state" ? { SUCCESS: "ok", FAILED: "bad" }[state] || "" : "",
      }, show(key, value))),
      el("td", {}, link(status.id, "status"), " ", link(status.id, "reports"), " ", link(status.id, "log")))));
}
