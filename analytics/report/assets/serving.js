/* REPORT.html, serving curves: output tok/s against p99 TPOT and TTFT per series (model · config · instance type,
   lane and run where they vary: a Pareto view, with the frontier of points no other beats on both axes), the
   closed-loop sweep against concurrency on a log2 axis, open-loop points against their offered rate on an axis of
   their own, and a clicked point's latency distribution (the views' quantiles, np-data) as CDFs. Only headline
   points (telemetry in the window, valid: rules 7 and 15); sustained points are under Sustained. */
"use strict";

function seriesName(p) {
  const lane = String(p.lane || "");
  const parts = [p.model, p.server_config, instanceOf(p.run_id, p.lane)];
  if (!/^serve_sweep(@|$)/.test(lane)) parts.push(lane.split("@")[0]);
  if (multiRun()) parts.unshift(p.run_id);
  if (p.workload) parts.push(p.workload);
  return parts.filter((x) => x !== null && x !== undefined && x !== "").join(" · ");
}

function pointKey(p) { return `${p.run_id}|${p.lane}|${p.point_id}`; }

/* a series whose points repeat a concurrency or rate (sweep repeats) is drawn as markers: a line through repeats
   would zigzag up and down at one x */
function seriesMode(g) {
  const xs = g.map((p) => (p.request_rate !== null && p.request_rate !== undefined ? p.request_rate : p.max_concurrency));
  return new Set(xs).size < xs.length ? "markers" : "lines+markers";
}

function servingSeries() {
  const pts = ((NP.comparison.serving || {}).points || []).filter((p) => isHeadline(p) && p.mode !== "sustained");
  const closed = new Map(), open = new Map();
  for (const p of pts) {
    const isOpen = p.request_rate !== null && p.request_rate !== undefined;
    const m = isOpen ? open : closed;
    const k = seriesName(p) + (isOpen ? "" : ` · ${p.input_len}:${p.output_len}`);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(p);
  }
  for (const [m, by] of [[closed, "max_concurrency"], [open, "request_rate"]]) {
    for (const g of m.values()) g.sort((a, b) => (a[by] ?? 0) - (b[by] ?? 0));
  }
  return {pts, closed, open};
}

/* the points no other point beats on both axes (lower latency and higher throughput): which plotted points to join */
function frontier(points, xKey) {
  const xs = points.filter((p) => typeof p[xKey] === "number" && typeof p.output_throughput === "number")
    .sort((a, b) => a[xKey] - b[xKey] || b.output_throughput - a.output_throughput);
  const out = [];
  let best = -Infinity;
  for (const p of xs) if (p.output_throughput > best) { out.push(p); best = p.output_throughput; }
  return out;
}

function pointLabel(p) {
  return p.request_rate !== null && p.request_rate !== undefined ? `rate ${fmt(p.request_rate)}/s` : `c=${p.max_concurrency}`;
}

function paretoChart(id, xKey, xLabel, S) {
  return chart(id, () => {
    const groups = [...S.closed.entries(), ...S.open.entries()].sort((a, b) => a[0].localeCompare(b[0]));
    const data = groups.map(([name, g], i) => ({
      type: "scatter", mode: seriesMode(g), name, x: g.map((p) => metric(p, xKey)), y: g.map((p) => p.output_throughput),
      text: g.map(pointLabel), customdata: g.map(pointKey),
      marker: {color: colorOf(i), size: 8, symbol: g[0].request_rate !== null && g[0].request_rate !== undefined ? "diamond" : "circle"},
      line: {color: colorOf(i), width: 1},
      hovertemplate: `%{text}<br>${xLabel}: %{x:.2f} ms<br>output %{y:.1f} tok/s<br>(click: latency CDF)<extra>${esc(name)}</extra>`,
    }));
    const models = distinct(S.pts.map((p) => p.model));
    for (const model of models) {
      const f = frontier(S.pts.filter((p) => p.model === model), xKey);
      if (f.length > 1) {
        data.push({type: "scatter", mode: "lines", name: `frontier · ${model}`, x: f.map((p) => metric(p, xKey)),
          y: f.map((p) => p.output_throughput), line: {color: "#888", dash: "dot", width: 1.5, shape: "hv"}, hoverinfo: "skip"});
      }
    }
    return {data, layout: baseLayout(`Output tok/s against ${xLabel} (Pareto view: up and left is better)`,
      {xaxis: latencyAxis(S.pts.map((p) => metric(p, xKey)), `${xLabel} (ms)`), yaxis: zeroAxis("output tokens/s")}),
      onDrawn: bindCdfClick};
  });
}

function concurrencyChart(id, title, yLabel, traces, S) {
  return chart(id, () => {
    const allX = [];
    const data = [];
    [...S.closed.entries()].sort((a, b) => a[0].localeCompare(b[0])).forEach(([name, g], i) => {
      traces.forEach(([key, suffix, dash], j) => {
        const xs = g.map((p) => p.max_concurrency);
        allX.push(...xs);
        data.push({type: "scatter", mode: seriesMode(g), name, legendgroup: name, showlegend: j === 0, x: xs,
          y: g.map((p) => metric(p, key)),
          customdata: g.map(pointKey), line: {color: colorOf(i), dash}, marker: {color: colorOf(i), size: 7},
          hovertemplate: `conc %{x}<br>${yLabel}${suffix}: %{y:.2f}<br>(click: latency CDF)<extra>${esc(name)}</extra>`});
      });
    });
    return {data, layout: baseLayout(title, {xaxis: log2Axis(allX, "max concurrency (log2)"), yaxis: zeroAxis(yLabel)}),
            onDrawn: bindCdfClick};
  });
}

function rateChart(id, S) {
  return chart(id, () => {
    const data = [...S.open.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([name, g], i) => ({
      type: "scatter", mode: seriesMode(g), name, x: g.map((p) => p.request_rate), y: g.map((p) => p.output_throughput),
      customdata: g.map(pointKey), marker: {color: colorOf(i), size: 8, symbol: "diamond"}, line: {color: colorOf(i)},
      hovertemplate: "offered %{x} req/s<br>output %{y:.1f} tok/s<br>(click: latency CDF)<extra>" + esc(name) + "</extra>"}));
    return {data, layout: baseLayout("Open loop: output tok/s against offered rate",
      {xaxis: linAxis("offered rate (req/s)", {rangemode: "tozero"}), yaxis: zeroAxis("output tokens/s")}), onDrawn: bindCdfClick};
  });
}

/* ---- the latency distribution of the clicked points ------------------------------------------------------- */
const CDF = {selected: [], entry: null, caption: null, max: 4};
const CDF_METRICS = [["ttft_ms", "TTFT"], ["tpot_ms", "TPOT"], ["e2el_ms", "E2EL"]];

function bindCdfClick(el) {
  el.on("plotly_click", (ev) => {
    const key = ev && ev.points && ev.points[0] && ev.points[0].customdata;
    if (key) selectCdf(key, ev.event && ev.event.shiftKey);
  });
}

function selectCdf(key, add) {
  const sel = add ? CDF.selected.filter((k) => k !== key) : [];
  sel.push(key);
  CDF.selected = sel.slice(-CDF.max);
  if (CDF.entry) redrawChart(CDF.entry);
  document.getElementById("s-serving").querySelector(".cdf").scrollIntoView({block: "nearest"});
}

function cdfFigure() {
  const pts = ((NP.comparison.serving || {}).points || []);
  const byKey = new Map(pts.map((p) => [pointKey(p), p]));
  const probs = NP.data.cdf_probabilities || [];
  const data = [];
  const lines = [];
  CDF.selected.forEach((key, i) => {
    const p = byKey.get(key), dist = (NP.data.distributions || {})[key];
    const name = p ? `${seriesName(p)} · ${pointLabel(p)}` : key;
    if (!dist) { lines.push(`${name}: no per-request rows (an aggregate-only or imported point)`); return; }
    lines.push(`${name}: ${fmt(dist.n)} successful requests`);
    CDF_METRICS.forEach(([m, label], j) => {
      const axis = j === 0 ? "" : String(j + 1);
      data.push({type: "scatter", mode: "lines", name, legendgroup: key, showlegend: j === 0, x: dist[m], y: probs,
        xaxis: "x" + axis, yaxis: "y" + axis, line: {color: colorOf(i), width: 2},
        hovertemplate: `${label} %{x:.2f} ms at p%{y:.3f}<extra>${esc(name)}</extra>`});
      if (p) {  // the table's own p50 and p99 on the curve (the same quantiles: they fall on it)
        const marks = [["p50", 0.5], ["p99", 0.99]].filter(([q]) => metric(p, `${q}_${m}`) !== null && metric(p, `${q}_${m}`) !== undefined);
        data.push({type: "scatter", mode: "markers", showlegend: false, legendgroup: key, xaxis: "x" + axis, yaxis: "y" + axis,
          x: marks.map(([q]) => metric(p, `${q}_${m}`)), y: marks.map(([, y]) => y), text: marks.map(([q]) => q),
          marker: {color: colorOf(i), size: 9, symbol: "line-ns-open", line: {width: 2}},
          hovertemplate: `%{text} ${label} (serving_points): %{x:.2f} ms<extra>${esc(name)}</extra>`});
      }
    });
  });
  const axes = {};
  CDF_METRICS.forEach(([, label], j) => {
    const s = j === 0 ? "" : String(j + 1);
    axes["xaxis" + s] = linAxis(`${label} (ms)`, {domain: [j / 3 + 0.02, (j + 1) / 3 - 0.03], anchor: "y" + s, rangemode: "tozero"});
    axes["yaxis" + s] = linAxis(j === 0 ? "fraction of requests" : "", {domain: [0, 1], anchor: "x" + s, range: [0, 1.02]});
  });
  if (CDF.caption) CDF.caption.textContent = lines.join(" · ") || "Click a point in a chart above.";
  return {data, layout: baseLayout("Latency distribution (CDF) of the selected point(s): click a point; shift-click adds one",
    Object.assign({height: 300}, axes))};
}

SECTION.serving = function (body) {
  const s = NP.comparison.serving || {};
  const S = servingSeries();
  if (!s.available && s.note) body.append(note(s.note, "none"));
  if (!S.pts.length) { body.append(noneLine("headline sweep points (serve_sweep and finetune_serve have not committed)")); return true; }
  body.append(note("Each series is one model · server config · instance type (and lane, run, workload where they vary). Click any point for its latency distribution; hover for its numbers. Throughput axes start at 0; concurrency is on a log2 axis."));
  body.append(h("div", {class: "plots2"},
    paretoChart("pareto-tpot", "p99_tpot_ms", "p99 TPOT", S),
    paretoChart("pareto-ttft", "p99_ttft_ms", "p99 TTFT", S)));
  CDF.caption = h("p", {class: "caption cdf-caption"});
  CDF.selected = [pointKey(S.pts.find((p) => (NP.data.distributions || {})[pointKey(p)]) || S.pts[0])];
  const cdf = chart("latency-cdf", cdfFigure, {wide: true});
  CDF.entry = NP.plots[NP.plots.length - 1];
  body.append(h("div", {class: "cdf"}, CDF.caption, cdf));
  if (S.closed.size) {
    body.append(h("div", {class: "plots2"},
      concurrencyChart("throughput-vs-concurrency", "Output throughput (solid) against concurrency, its roofline bound dotted", "output tokens/s", [["output_throughput", "", "solid"], ["output_tokens_per_s_bound", " bound (roofline)", "dot"]], S),
      concurrencyChart("ttft-vs-concurrency", "TTFT p50 (solid) and p99 (dashed) against concurrency", "TTFT ms", [["p50_ttft_ms", " p50", "solid"], ["p99_ttft_ms", " p99", "dash"]], S)),
    h("div", {class: "plots2"},
      concurrencyChart("tpot-vs-concurrency", "TPOT p50 (solid) and p99 (dashed) against concurrency", "TPOT ms", [["p50_tpot_ms", " p50", "solid"], ["p99_tpot_ms", " p99", "dash"]], S),
      S.open.size ? rateChart("throughput-vs-rate", S) : null));
  } else if (S.open.size) {
    body.append(rateChart("throughput-vs-rate", S));
  }
  const rows = S.pts;
  body.append(h("details", {}, h("summary", {}, `Every headline point (${rows.length})`),
    dataTable({id: "serving-points", rows, filters: [{key: "_series", label: "series", value: seriesName}, {key: "lane", label: "lane"}, {key: "server_config", label: "config"}],
      columns: [textColumn("series", "series", {value: seriesName, cell: seriesName}), numColumn("max_concurrency", "conc"),
        numColumn("request_rate", "rate"), ciColumn("output_throughput", "out tok/s [95 % CI]"),
        numColumn("limit_fraction", "% of limit", {cell: (p) => (typeof p.limit_fraction === "number" ? fmt(100 * p.limit_fraction) + " %" : h("span", {class: "null"}, "NULL"))}),
        ciColumn("p50_ttft_ms", "TTFT p50 ms"), ciColumn("p99_ttft_ms", "TTFT p99 ms"),
        ciColumn("p50_tpot_ms", "TPOT p50 ms"), ciColumn("p99_tpot_ms", "TPOT p99 ms"), ciColumn("goodput", "goodput req/s"),
        numColumn("completed", "completed"), numColumn("failed", "failed"),
        {key: "cdf", label: "CDF", cell: (p) => h("button", {type: "button", class: "link", onclick: () => selectCdf(pointKey(p), false)}, "show")}]})));
  return true;
};
