/* REPORT.html, charts: every chart is registered with a builder and drawn by plotly.js when its container first
   comes near the viewport (IntersectionObserver), so the page opens at the cost of its first screen; drawAll()
   draws the rest (a screenshot, a print). Axis conventions: concurrency on a log2 axis with integer ticks,
   rates on their own linear axis, throughput axes from 0. */
"use strict";

// matplotlib's tab10, then its lighter tab20 partners: 20 series before a colour repeats
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#aec7e8", "#ff9896", "#98df8a", "#c5b0d5", "#ffbb78", "#9edae5", "#c49c94",
                 "#f7b6d2", "#c7c7c7", "#dbdb8d"];
const PLOT_CONFIG = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"]};

function colorOf(i) { return PALETTE[i % PALETTE.length]; }

function baseLayout(title, extra) {
  return Object.assign({
    title: {text: title, font: {size: 13}, x: 0, xanchor: "left"},
    height: 340, margin: {l: 64, r: 16, t: 40, b: 48}, hovermode: "closest",

    font: {family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 11},
    paper_bgcolor: "#fff", plot_bgcolor: "#fff",
  }, extra || {});
}

/* x axis for concurrency: log2, ticks at the powers of two the values span, labelled as integers */
function log2Axis(values, title) {
  const xs = values.filter((v) => typeof v === "number" && v > 0);
  const lo = xs.length ? Math.min(...xs) : 1, hi = xs.length ? Math.max(...xs) : 1;
  const ticks = [];
  for (let k = Math.floor(Math.log2(lo)); k <= Math.ceil(Math.log2(hi)); k++) ticks.push(2 ** k);
  const pad = 0.12;
  return {type: "log", title: {text: title}, tickvals: ticks, ticktext: ticks.map((t) => String(t)),
          range: [Math.log10(lo) - pad, Math.log10(hi) + pad], gridcolor: "#eee", zeroline: false};
}

function zeroAxis(title, extra) {  // a throughput (or any count) axis: from 0
  return Object.assign({title: {text: title}, rangemode: "tozero", gridcolor: "#eee", zeroline: true}, extra || {});
}

function linAxis(title, extra) { return Object.assign({title: {text: title}, gridcolor: "#eee", zeroline: false}, extra || {}); }

/* a latency axis: linear, from 0, unless the values span more than 50x (then log, so no series is squashed) */
function latencyAxis(values, title) {
  const xs = values.filter((v) => typeof v === "number" && v > 0);
  if (xs.length && Math.max(...xs) / Math.min(...xs) > 50) return {type: "log", title: {text: title + " (log)"}, gridcolor: "#eee", dtick: 1};
  return linAxis(title, {rangemode: "tozero"});
}

/* register a chart: a container now, the drawing when it is seen */
function chart(id, build, opts) {
  const el = h("div", {class: "np-plot" + (opts && opts.wide ? " wide" : ""), "data-plot": id, role: "img",
                       "aria-label": id});
  const entry = {id, el, build, drawn: false, promise: null};
  NP.plots.push(entry);
  if (chart.observer) chart.observer.observe(el);
  return el;
}

/* Legends never cover an axis: a few entries sit below the plot, in a bottom margin grown by their rows; many (a
   series is model · config · instance type ...) make the chart span the row with the legend at its right, where
   plotly.js scrolls it when it is taller than the plot. */
const LEGEND_BELOW_MAX = 6;

function placeLegend(fig, el) {
  const names = fig.data.filter((t) => t.showlegend !== false && t.name).map((t) => String(t.name));
  const layout = fig.layout;
  if (!names.length || layout.showlegend === false) return;
  const longest = Math.max(...names.map((n) => n.length));
  if (names.length > LEGEND_BELOW_MAX) {
    el.classList.add("wide");
    layout.margin = Object.assign({}, layout.margin, {r: Math.min(460, 40 + longest * 6.2)});
    layout.height = Math.max(layout.height || 340, Math.min(600, 70 + names.length * 19));
    layout.legend = Object.assign({orientation: "v", x: 1.01, xanchor: "left", y: 1, yanchor: "top", font: {size: 10}},
                                  layout.legend || {});
    return;
  }
  const width = el.clientWidth || 640;
  const perRow = Math.max(1, Math.floor((width - 40) / (longest * 6.2 + 44)));
  const extra = Math.ceil(names.length / perRow) * 17 + 8;
  layout.margin = Object.assign({}, layout.margin, {b: (layout.margin.b || 48) + extra});
  layout.height = (layout.height || 340) + extra;
  layout.legend = Object.assign({orientation: "h", yref: "container", y: 0, yanchor: "bottom", x: 0, xanchor: "left",
                                 font: {size: 10}}, layout.legend || {});
}

function drawChart(entry) {
  if (entry.promise) return entry.promise;
  let fig;
  try {
    fig = entry.build();
    placeLegend(fig, entry.el);
    entry.el.style.height = `${fig.layout.height || 340}px`;  // a resize (responsive) keeps the figure's height
  } catch (err) {
    NP.errors.push(`${entry.id}: ${err}`);
    entry.el.append(note(`chart not drawn: ${err}`, "none"));
    return (entry.promise = Promise.resolve());
  }
  entry.promise = Plotly.newPlot(entry.el, fig.data, fig.layout, Object.assign({}, PLOT_CONFIG, fig.config || {}))
    .then(() => {
      entry.drawn = true;
      entry.el.dataset.drawn = "1";
      NP.drawn += 1;
      if (fig.onDrawn) fig.onDrawn(entry.el);
    });
  return entry.promise;
}

function redrawChart(entry) {  // new data for a drawn chart (the CDF panel after a click)
  entry.promise = null;
  return drawChart(entry);
}

NP.drawAll = function () {
  if (!window.Plotly) loadChartLibrary();
  return Promise.all(NP.plots.map(drawChart));
};

function startLazyDrawing() {
  if (!("IntersectionObserver" in window)) { NP.drawAll(); return; }
  chart.observer = new IntersectionObserver((seen) => {
    for (const s of seen) {
      if (!s.isIntersecting) continue;
      const entry = NP.plots.find((p) => p.el === s.target);
      if (entry) { chart.observer.unobserve(s.target); drawChart(entry); }
    }
  }, {rootMargin: "300px 0px"});
  for (const p of NP.plots) chart.observer.observe(p.el);
}

/* a vertical marker line (the capacity knee) as a layout shape */
function vline(x, color, dash) {
  return {type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
          line: {color: color || "#666", width: 1.5, dash: dash || "dash"}};
}

function vband(x0, x1, color) {
  return {type: "rect", xref: "x", yref: "paper", x0, x1, y0: 0, y1: 1, fillcolor: color || "#999",
          opacity: 0.12, line: {width: 0}, layer: "below"};
}
