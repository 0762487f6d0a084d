// The results grid: sortable columns, copy as CSV/TSV/JSON, download. Every row is kept; the
// first DISPLAY_LIMIT are drawn (copy and download always carry them all).

import { el, formatNumber } from "./api.js";

export const DISPLAY_LIMIT = 2000;

const NUMERIC = new Set(["LONG", "DOUBLE", "FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "DECIMAL", "REAL"]);

export function isNumeric(column) {
  const type = column.sqlType || column.type; // a TIMESTAMP travels as a LONG: the SQL type decides
  return NUMERIC.has(String(type || "").toUpperCase());
}

function csvCell(value, separator) {
  if (value === null || value === undefined) return "";
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  if (separator === "\t") return text.replace(/[\t\n\r]/g, " ");
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function formatResult(result, format) {
  const names = result.columns.map((c) => c.name);
  if (format === "json") {
    return JSON.stringify(result.rows.map((row) => Object.fromEntries(names.map((n, i) => [n, row[i]]))), null, 2);
  }
  const separator = format === "tsv" ? "\t" : ",";
  const lines = [names, ...result.rows].map((row) => row.map((v) => csvCell(v, separator)).join(separator));
  return lines.join("\n") + "\n";
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = el("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}

function download(text, format) {
  const types = { csv: "text/csv", tsv: "text/tab-separated-values", json: "application/json" };
  const url = URL.createObjectURL(new Blob([text], { type: types[format] }));
  const a = el("a", { href: url, download: `strata-result.${format}` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function compare(a, b, numeric) {
  if (a === null || a === undefined) return b === null || b === undefined ? 0 : -1;
  if (b === null || b === undefined) return 1;
  if (numeric) return Number(a) - Number(b);
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}

function cellText(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// Draws `result` ({columns, rows}) into `host`, with its toolbar in `tools`.
export function renderGrid(host, tools, result) {
  let order = null; // {index, descending}
  const note = el("span", { class: "grid-note" });
  const draw = () => {
    const rows = result.rows.slice();
    if (order) {
      const numeric = isNumeric(result.columns[order.index]);
      rows.sort((a, b) => compare(a[order.index], b[order.index], numeric) * (order.descending ? -1 : 1));
    }
    const head = el("tr", {}, result.columns.map((c, i) => el(
      "th",
      {
        "data-col": c.name,
        title: `${c.sqlType || c.type || ""} — click to sort`,
        class: isNumeric(c) ? "num" : "",
        "aria-sort": order && order.index === i ? (order.descending ? "descending" : "ascending") : "none",
        onclick: () => {
          order = order && order.index === i ? { index: i, descending: !order.descending } : { index: i, descending: false };
          draw();
        },
      },
      c.name,
      order && order.index === i ? (order.descending ? " ▼" : " ▲") : "",
    )));
    const body = rows.slice(0, DISPLAY_LIMIT).map((row) => el("tr", {}, row.map((v, i) => el(
      "td",
      { class: (v === null ? "null " : "") + (isNumeric(result.columns[i]) ? "num" : ""), "data-value": cellText(v) },
      isNumeric(result.columns[i]) && v !== null ? formatNumber(v) : cellText(v),
    ))));
    host.replaceChildren(el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, body)));
    note.textContent = result.rows.length > DISPLAY_LIMIT
      ? `showing ${DISPLAY_LIMIT.toLocaleString("en-US")} of ${result.rows.length.toLocaleString("en-US")} rows (copy and download carry all)`
      : "";
  };
  const status = el("span", { class: "copy-status", "aria-live": "polite" });
  const copyButton = (format) => el("button", {
    type: "button", "data-copy": format,
    onclick: async () => {
      status.textContent = (await copyText(formatResult(result, format))) ? `copied as ${format.toUpperCase()}` : "copy failed";
    },
  }, `Copy ${format.toUpperCase()}`);
  const formatPicker = el("select", { "aria-label": "download format" },
    el("option", { value: "csv" }, "CSV"), el("option", { value: "tsv" }, "TSV"), el("option", { value: "json" }, "JSON"));
  tools.replaceChildren(
    copyButton("csv"), copyButton("tsv"), copyButton("json"),
    el("span", { class: "sep" }),
    formatPicker,
    el("button", { type: "button", "data-download": "", onclick: () => download(formatResult(result, formatPicker.value), formatPicker.value) }, "Download"),
    status, note,
  );
  draw();
}
