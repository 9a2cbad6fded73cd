/* REPORT.html, shared helpers: the two data blocks, one spelling of every value (REPORT.md's fmt), badges,
   intervals as ranges. Nothing here computes a metric: values are shown as comparison.json holds them. */
"use strict";

window.npReport = (function () {
  const started = performance.now();  // ms since navigation: the HTML read and plotly.js evaluated
  const read = (id) => JSON.parse(document.getElementById(id).textContent);
  const out = {comparison: read("np-comparison"), data: read("np-data"), plots: [], errors: [], sections: {},
               drawn: 0, ready: false, timings: {scripts_ms: started}};
  out.timings.data_parsed_ms = performance.now();
  return out;
})();

const NP = window.npReport;

/* analytics/report/format.py's fmt: NULL stays visible; floats by magnitude; booleans as yes/no. JSON keeps no
   int/float distinction, so an integral float (2.0) reads as the integer (2). */
function fmtG(v, p) {
  if (v === 0) return "0";
  const [mant, ex] = v.toExponential(p - 1).split("e");
  const exp = parseInt(ex, 10);
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exp < -4 || exp >= p) {
    return strip(mant) + "e" + (exp < 0 ? "-" : "+") + String(Math.abs(exp)).padStart(2, "0");
  }
  return strip(v.toFixed(Math.max(0, p - 1 - exp)));
}

function fmt(v) {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") {
    const a = Math.abs(v);
    if (Number.isInteger(v)) return a >= 10000 ? v.toLocaleString("en-US") : String(v);
    if (a >= 1e7) return fmtG(v, 4);
    if (a >= 1000) return Math.round(v).toLocaleString("en-US");
    if (a >= 1) return v.toFixed(2);
    return fmtG(v, 3);
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "html") e.innerHTML = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/* verdicts and statuses as badges: one colour per meaning */
const BADGE_KIND = {
  "succeeded": "good", "partial": "warn", "failed": "bad", "skipped": "muted",
  "cheapest": "good", "only candidate": "good", "tied within noise": "info", "ranked": "muted",
  "untested": "muted", "SLO never met": "bad", "closed loop only": "warn", "not priced": "muted",
  "measured elsewhere": "info", "faster": "good", "slower": "bad", "within noise": "info",
  "meets SLO": "good", "no point meets": "bad", "pass": "good", "fail": "bad", "passed": "good",
  "held": "good", "missed": "bad", "not run": "muted",
};

function badgeKind(text) {
  const t = String(text);
  if (BADGE_KIND[t]) return BADGE_KIND[t];
  if (/regression|slower|worse|fail/i.test(t)) return "bad";
  if (/faster|better|pass|cheapest/i.test(t)) return "good";
  if (/noise|tied|same|equivalent/i.test(t)) return "info";
  return "muted";
}

function badge(text, kind) {
  if (text === null || text === undefined) return h("span", {class: "null"}, "NULL");
  return h("span", {class: "badge b-" + (kind || badgeKind(text)), title: String(text)}, String(text));
}

/* A value with its 95 % interval shown as a range: the numbers, and a bar placed on the column's scale
   (scale = [min, max] over the column's values and bounds; plotting, not a statistic). */
function ciCell(v, lo, hi, scale) {
  const wrap = h("span", {class: "ci-cell"}, h("span", {class: "num"}, fmt(v)));
  if (v === null || v === undefined) return wrap;
  if (lo === null && hi === null) return wrap;
  if (lo === undefined && hi === undefined) return wrap;
  const b = (x) => (x === null || x === undefined ? "?" : fmt(x));
  wrap.append(h("span", {class: "ci", title: "95 % interval"}, `[${b(lo)}, ${b(hi)}]`));
  if (scale && scale[1] > scale[0]) {
    const pos = (x) => (100 * (x - scale[0])) / (scale[1] - scale[0]);
    const l = pos(lo === null || lo === undefined ? v : lo), r = pos(hi === null || hi === undefined ? v : hi);
    wrap.append(h("span", {class: "rng", "aria-hidden": "true"},
      h("i", {style: `left:${l.toFixed(1)}%;width:${Math.max(0.8, r - l).toFixed(1)}%`}),
      h("b", {style: `left:${pos(v).toFixed(1)}%`})));
  }
  return wrap;
}

function scaleOf(rows, key) {
  const xs = [];
  for (const r of rows) for (const k of [key, key + "_ci_low", key + "_ci_high"]) {
    const x = r[k];
    if (typeof x === "number" && isFinite(x)) xs.push(x);
  }
  return xs.length ? [Math.min(...xs), Math.max(...xs)] : null;
}

function note(text, cls) { return h("p", {class: cls || "note"}, text); }

function noneLine(what) { return h("p", {class: "none"}, `No ${what} in these results.`); }

/* a point is a headline point (analytics/report/compare.py is_headline_point): telemetry in its window, not
   flagged invalid (rules 7 and 15: excluded from every table and chart) */
function isHeadline(p) { return (p.telemetry_samples || 0) > 0 && p.valid !== false; }

/* compare.py metric_value: p50_* falls back to vLLM's median_* spelling */
function metric(p, name) {
  if ((p[name] === null || p[name] === undefined) && name.startsWith("p50_")) return p["median_" + name.slice(4)];
  return p[name];
}

function multiRun() { return (NP.comparison.run_ids || []).length > 1; }

function distinct(values) { return [...new Set(values.filter((v) => v !== null && v !== undefined))]; }
