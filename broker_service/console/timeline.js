// A datasource's segments as a picture: time across, one lane per version (newest on top), each
// segment a box over its interval, partitions stacked in the lane. Colour says who serves it
// (historical or real-time), overshadowed segments are hatched grey, unavailable ones outlined red.

import { formatBytes, formatNumber, svg } from "./api.js";

const LANE = 26;
const LABEL_W = 190;

function segmentClass(s) {
  if (Number(s.is_overshadowed)) return "seg seg-overshadowed";
  if (!Number(s.is_available)) return "seg seg-unavailable";
  return Number(s.is_realtime) ? "seg seg-realtime" : "seg seg-historical";
}

function dateLabel(ms, span) {
  const iso = new Date(ms).toISOString();
  return span <= 3 * 86400000 ? iso.slice(5, 16).replace("T", " ") : iso.slice(0, 10);
}

export function renderTimeline(segments, width) {
  const versions = [...new Set(segments.map((s) => s.version))].sort().reverse();
  const starts = segments.map((s) => Date.parse(s.start)).filter(Number.isFinite);
  const ends = segments.map((s) => Date.parse(s.end)).filter(Number.isFinite);
  const t0 = starts.reduce((m, t) => Math.min(m, t), Infinity); // no spread: thousands of segments
  const t1 = ends.reduce((m, t) => Math.max(m, t), -Infinity);
  const plotW = width - LABEL_W - 16;
  const height = versions.length * LANE + 30;
  const x = (t) => LABEL_W + ((t - t0) / (t1 - t0 || 1)) * plotW;
  const root = svg("svg", { class: "timeline", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("defs", {}, svg("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      svg("rect", { width: 6, height: 6, fill: "#e4e4e4" }), svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#9a9a9a", "stroke-width": 2 }))));
  versions.forEach((version, lane) => {
    const top = lane * LANE + 4;
    root.append(svg("text", { x: 4, y: top + LANE / 2 + 3, class: "lane-label" }, version.length > 28 ? version.slice(0, 27) + "…" : version));
    root.append(svg("line", { x1: LABEL_W, x2: width - 16, y1: top + LANE - 2, y2: top + LANE - 2, class: "gridline" }));
    const inLane = segments.filter((s) => s.version === version);
    const groups = new Map();
    for (const s of inLane) {
      const key = `${s.start}/${s.end}`;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(s);
    }
    for (const parts of groups.values()) {
      parts.sort((a, b) => Number(a.partition_num) - Number(b.partition_num));
      const h = (LANE - 6) / parts.length;
      parts.forEach((s, k) => {
        const left = x(Date.parse(s.start));
        const right = x(Date.parse(s.end));
        root.append(svg("rect", {
          x: left + 0.5, y: top + k * h, width: Math.max(right - left - 1, 1.5), height: Math.max(h - 0.5, 1),
          class: segmentClass(s), "data-segment": s.segment_id,
        }, svg("title", {}, `${s.segment_id}\n${s.start}/${s.end} version ${s.version} partition ${s.partition_num}\n` +
          `${formatNumber(s.num_rows)} rows, ${formatBytes(s.size)}, ${s.num_replicas} replica(s)` +
          `${Number(s.is_realtime) ? ", real-time" : ", historical"}${Number(s.is_overshadowed) ? ", overshadowed" : ""}` +
          `${Number(s.is_available) ? "" : ", not loaded"}`)));
      });
    }
  });
  const axisY = versions.length * LANE + 18;
  for (let i = 0; i <= 4; i += 1) {
    const t = t0 + ((t1 - t0) * i) / 4;
    root.append(svg("text", { x: x(t), y: axisY, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "tick" }, dateLabel(t, t1 - t0)));
  }
  return root;
}
