// A chart of a result, in plain SVG: a time column and numbers make a time series (one line per
// number column), a string column and a number make bars. Anything else has no chart.

import { el, formatNumber, svg } from "./api.js";
import { isNumeric } from "./grid.js";

const COLORS = ["#2f6fdf", "#e07b22", "#2a9d5c", "#c43c5c", "#7b52c7", "#8a7a2a"];
const MAX_BARS = 40;

function isTime(column, rows, index) {
  if (["TIMESTAMP", "DATE"].includes(String(column.sqlType || "").toUpperCase())) return true;
  if (column.name === "__time" || column.name === "timestamp") return true;
  const sample = rows.find((r) => r[index] !== null && r[index] !== undefined);
  return !!sample && typeof sample[index] === "string" && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(sample[index]);
}

// What the result can be drawn as: {kind: "time"|"bars", x, ys} or null.
export function chartSpec(result) {
  const { columns, rows } = result;
  if (!rows.length) return null;
  const numbers = columns.map((c, i) => (isNumeric(c) ? i : -1)).filter((i) => i >= 0);
  const time = columns.findIndex((c, i) => isTime(c, rows, i));
  if (time >= 0) {
    const ys = numbers.filter((i) => i !== time);
    if (ys.length) return { kind: "time", x: time, ys: ys.slice(0, COLORS.length) };
  }
  const label = columns.findIndex((c, i) => !isNumeric(c) && i !== time);
  if (label >= 0 && numbers.length) return { kind: "bars", x: label, ys: [numbers[0]] };
  return null;
}

function ticks(min, max, count) {
  if (min === max) return [min];
  const step = Math.pow(10, Math.floor(Math.log10((max - min) / count)));
  const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => (max - min) / s <= count) || step * 10;
  const out = [];
  for (let v = Math.ceil(min / nice) * nice; v <= max + 1e-9; v += nice) out.push(v);
  return out;
}

const MINUTE = 60000;
const TIME_STEPS = [1, 5, 15, 30, 60, 180, 360, 720, 1440, 10080, 43200, 525600].map((m) => m * MINUTE);

// Time ticks on whole minutes, hours, days (UTC), at most about `count` of them.
function timeTicks(min, max, count) {
  const step = TIME_STEPS.find((s) => (max - min) / s <= count) || TIME_STEPS[TIME_STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(min / step) * step; t <= max; t += step) out.push(t);
  return out;
}

function timeLabel(ms, span) {
  const iso = new Date(ms).toISOString();
  if (span <= 2 * 86400000) return iso.slice(11, 16);
  return iso.slice(0, 10);
}

export function renderChart(host, result) {
  const spec = chartSpec(result);
  if (!spec) {
    host.replaceChildren(el("p", { class: "muted" },
      "No chart for this result: it needs a time column and number columns (a time series), or a string column and a number (bars)."));
    return null;
  }
  const width = Math.max(host.clientWidth || 0, 640);
  const height = 320;
  const pad = { left: 70, right: 20, top: 16, bottom: spec.kind === "bars" ? 90 : 40 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const root = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, "data-kind": spec.kind, role: "img" });
  const columns = result.columns;
  let rows = result.rows.filter((r) => r[spec.x] !== null && r[spec.x] !== undefined);
  let yValues = rows.flatMap((r) => spec.ys.map((i) => Number(r[i]))).filter(Number.isFinite);
  if (spec.kind === "bars") rows = rows.slice(0, MAX_BARS);
  if (spec.kind === "bars") yValues = rows.map((r) => Number(r[spec.ys[0]])).filter(Number.isFinite);
  const yMin = yValues.reduce((m, v) => Math.min(m, v), 0); // no spread: results may be long
  const yMax = yValues.reduce((m, v) => Math.max(m, v), 0);
  const y = (v) => pad.top + plotH - ((v - yMin) / (yMax - yMin || 1)) * plotH;
  for (const t of ticks(yMin, yMax, 5)) {
    root.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y(t), y2: y(t), class: "gridline" }));
    root.append(svg("text", { x: pad.left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, formatNumber(t)));
  }
  if (spec.kind === "time") {
    const points = rows.map((r) => [Date.parse(r[spec.x]), r]).filter(([t]) => Number.isFinite(t)).sort((a, b) => a[0] - b[0]);
    const tMin = points.length ? points[0][0] : 0;
    const tMax = points.length ? points[points.length - 1][0] : 1;
    const x = (t) => pad.left + ((t - tMin) / (tMax - tMin || 1)) * plotW;
    for (const t of timeTicks(tMin, tMax, 8)) {
      root.append(svg("text", { x: x(t), y: height - pad.bottom + 18, "text-anchor": "middle", class: "tick" }, timeLabel(t, tMax - tMin)));
    }
    spec.ys.forEach((col, k) => {
      const pts = points.filter(([, r]) => Number.isFinite(Number(r[col]))).map(([t, r]) => `${x(t).toFixed(1)},${y(Number(r[col])).toFixed(1)}`);
      root.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[k], "stroke-width": 2, class: "series", "data-col": columns[col].name }));
      if (pts.length < 60) {
        for (const p of pts) {
          const [cx, cy] = p.split(",");
          root.append(svg("circle", { cx, cy, r: 3, fill: COLORS[k] }));
        }
      }
    });
  } else {
    const band = plotW / Math.max(rows.length, 1);
    rows.forEach((r, i) => {
      const v = Number(r[spec.ys[0]]);
      const top = y(Math.max(v, 0));
      const bar = svg("rect", {
        x: pad.left + i * band + band * 0.1, y: top, width: Math.max(band * 0.8, 1),
        height: Math.abs(y(v) - y(0)), fill: COLORS[0], class: "bar", "data-label": String(r[spec.x]), "data-value": v,
      }, svg("title", {}, `${r[spec.x]}: ${formatNumber(v)}`));
      root.append(bar);
      const lx = pad.left + i * band + band / 2;
      const label = String(r[spec.x]);
      root.append(svg("text", { x: lx, y: height - pad.bottom + 10, transform: `rotate(40 ${lx} ${height - pad.bottom + 10})`, class: "tick" },
        label.length > 18 ? label.slice(0, 17) + "…" : label));
    });
  }
  root.append(svg("line", { x1: pad.left, x2: pad.left, y1: pad.top, y2: pad.top + plotH, class: "axis" }));
  root.append(svg("line", { x1: pad.left, x2: width - pad.right, y1: y(0), y2: y(0), class: "axis" }));
  const legend = el("div", { class: "legend" }, spec.ys.map((col, k) => el("span", {},
    el("i", { style: `background:${COLORS[k]}` }), columns[col].name)),
  el("span", { class: "muted" }, spec.kind === "time" ? ` over ${columns[spec.x].name}` : ` by ${columns[spec.x].name}` +
    (result.rows.length > MAX_BARS ? ` (first ${MAX_BARS} rows)` : "")));
  host.replaceChildren(root, legend);
  return spec;
}
