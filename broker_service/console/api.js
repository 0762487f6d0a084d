// The broker's public HTTP API as the console uses it. Paths are relative to /console/, so the
// console works behind a proxy that mounts the broker under a prefix; the browser's own
// credentials (HTTP Basic on a secured cluster) go with every request.

export const BASE = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, body) {
    // Druid's error body, or the SQL task API's SqlTaskStatus that carries one under `error`
    const detail = body && typeof body === "object" && body.error && typeof body.error === "object" ? body.error : body;
    const message = detail && typeof detail === "object"
      ? detail.errorMessage || detail.error || JSON.stringify(detail)
      : String(detail || `HTTP ${status}`);
    super(message);
    this.status = status;
    this.body = body;
  }
}

async function readBody(response) {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return text;
  }
}

export async function request(path, { method = "GET", body, signal } = {}) {
  const init = { method, credentials: "same-origin", signal, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const response = await fetch(new URL(path, BASE), init);
  const parsed = await readBody(response);
  if (!response.ok) throw new ApiError(response.status, parsed);
  return { body: parsed, headers: response.headers, status: response.status };
}

export async function getJson(path) {
  return (await request(path)).body;
}

// Runs SQL; answers {columns: [{name, type, sqlType}], rows: [[...]], queryId}.
export async function sql(query, { queryId, context = {}, signal } = {}) {
  const body = {
    query,
    resultFormat: "array",
    header: true,
    typesHeader: true,
    sqlTypesHeader: true,
    context: queryId ? { ...context, sqlQueryId: queryId } : context,
  };
  const { body: rows, headers } = await request("druid/v2/sql/", { method: "POST", body, signal });
  const [names = [], types = [], sqlTypes = [], ...data] = rows || [];
  const columns = names.map((name, i) => ({ name, type: types[i], sqlType: sqlTypes[i] }));
  return { columns, rows: data, queryId: headers.get("X-Druid-SQL-Query-Id") || queryId };
}

// Rows as objects, for the pages that read system tables.
export async function sqlObjects(query) {
  const { columns, rows } = await sql(query);
  return rows.map((row) => Object.fromEntries(columns.map((c, i) => [c.name, row[i]])));
}

export function newQueryId() {
  if (crypto.randomUUID) return "console-" + crypto.randomUUID();
  return "console-" + Date.now().toString(36) + Math.random().toString(36).slice(2);
}

export function formatBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function formatNumber(n) {
  if (n === null || n === undefined || n === "") return "—";
  const value = Number(n);
  if (!Number.isFinite(value)) return String(n);
  return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function errorBox(error) {
  let detail = error && error.body && typeof error.body === "object" ? error.body : null;
  if (detail && detail.error && typeof detail.error === "object") detail = detail.error;
  return el(
    "div",
    { class: "error", role: "alert" },
    el("strong", { text: detail && detail.error ? detail.error : "Error" }),
    " ",
    error && error.message ? error.message : String(error),
  );
}
