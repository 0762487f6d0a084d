// The Ingestion page's tasks: Druid's task API (GET /druid/indexer/v1/tasks), which the broker
// relays to the coordinator-overlord. Each row links the task's status, report and log.

import { BASE, el, errorBox, formatNumber, getJson } from "./api.js";

const STATE_CLASS = { SUCCESS: "ok", FAILED: "bad" };

function taskLink(id, what) {
  const href = new URL(`druid/indexer/v1/task/${encodeURIComponent(id)}/${what}`, BASE);
  return el("a", { href: href.href, target: "_blank", rel: "noopener", "data-link": what }, what);
}

function formatMs(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  return ms < 10000 ? `${formatNumber(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// The state a person reads: complete tasks by their outcome, others by where they are.
export function taskState(task) {
  if (task.statusCode !== "RUNNING") return task.statusCode;
  return task.runnerStatusCode === "RUNNING" ? "RUNNING" : task.runnerStatusCode;
}

export async function tasksSection() {
  let tasks;
  try {
    tasks = await getJson("druid/indexer/v1/tasks");
  } catch (error) {
    if (error.status === 503) {
      return el("p", { class: "muted", id: "tasks-table" }, `No coordinator-overlord: ${error.message}`);
    }
    return errorBox(error);
  }
  if (!tasks.length) return el("p", { class: "muted", id: "tasks-table" }, "No task has been submitted yet.");
  const rows = tasks.map((t) => {
    const state = taskState(t);
    return el("tr", { "data-task": t.id, "data-state": state },
      el("td", { "data-key": "id", "data-value": t.id }, t.id),
      el("td", { "data-key": "type", "data-value": t.type }, t.type),
      el("td", { "data-key": "dataSource", "data-value": t.dataSource }, t.dataSource),
      el("td", { "data-key": "state", "data-value": state, class: STATE_CLASS[state] || "" }, state),
      el("td", { "data-key": "createdTime", "data-value": t.createdTime }, t.createdTime),
      el("td", { class: "num", "data-key": "duration", "data-value": String(t.duration) }, formatMs(t.duration)),
      el("td", { "data-key": "errorMsg", "data-value": t.errorMsg || "" }, t.errorMsg || ""),
      el("td", {}, taskLink(t.id, "status"), " ", taskLink(t.id, "reports"), " ", taskLink(t.id, "log")));
  });
  return el("table", { class: "grid info", id: "tasks-table" },
    el("thead", {}, el("tr", {}, ["Task", "Type", "Datasource", "State", "Created", "Duration", "Error", ""].map(
      (label) => el("th", { class: label === "Duration" ? "num" : "" }, label)))),
    el("tbody", {}, rows));
}
