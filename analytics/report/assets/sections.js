/* REPORT.html, the sections other than the serving curves (serving.js): each renders rows comparison.json holds,
   in the wording and spelling of REPORT.md (analytics/report/*_md.py), and returns false when it has nothing. */
"use strict";

const SECTION = {};

function shapeText(r) {  // decision_md._shape: 64:16, or the workload with its nominal shape
  const shape = r.input_len === null || r.input_len === undefined ? null : `${r.input_len}:${r.output_len}`;
  if (r.workload) return shape ? `${r.workload} (${shape})` : String(r.workload);
  return shape;
}

function instanceOf(runId, lane) {  // the lane's instance type (runs[].lanes), else its box role
  const run = (NP.comparison.runs || []).find((r) => r.run_id === runId);
  const l = run && (run.lanes || []).find((x) => x.lane === lane);
  return l ? (l.instance_type || l.box_role || null) : null;
}

/* ---- outcome and exclusions ------------------------------------------------------------------------------- */
SECTION.outcome = function (body) {
  const ex = NP.comparison.exclusions || [];
  body.append(h("h3", {}, `Exclusions (${ex.length})`));
  if (!ex.length) {
    body.append(note("None: every lane attempt succeeded or was skipped on resume, and no point was excluded.", "none"));
    return true;
  }
  body.append(note("A point excluded from one table is excluded from every table, chart and the Decision (rule 15)."));
  body.append(dataTable({id: "exclusions", rows: ex, columns: [
    textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("attempt", "attempt"),
    badgeColumn("kind", "kind", {text: (r) => r.kind}), textColumn("subject", "subject"), textColumn("reason", "reason")],
    filters: [{key: "run_id", label: "run"}, {key: "lane", label: "lane"}, {key: "kind", label: "kind"}]}));
  return true;
};

/* ---- the Decision ----------------------------------------------------------------------------------------- */
const DECISION_FILTERS = [{key: "model", label: "model"}, {key: "instance", label: "instance type"},
  {key: "server_config", label: "config"}, {key: "workload", label: "workload", value: (r) => shapeText(r)},
  {key: "slo_name", label: "SLO"}];

function closedLoopCell(r) {  // decision_md: ">= 8 (top of the grid)"
  if (r.max_concurrency === null || r.max_concurrency === undefined) return h("span", {class: "null"}, "NULL");
  return r.at_grid_top ? `>= ${fmt(r.max_concurrency)} (top of the grid)` : fmt(r.max_concurrency);
}

function rateBracketCell(r) {  // decision_md: "1.50 [1.50, 2.00)"; the bracket from the search's points
  const lo = r.max_rate_meeting_slo, hi = r.lowest_rate_missing_slo;
  if ((lo === null || lo === undefined) && (hi === null || hi === undefined)) {
    return r.capacity_lane ? "none meets" : h("span", {class: "null"}, "no search");
  }
  return `${lo === null ? "none" : fmt(lo)} [${lo === null ? "-" : fmt(lo)}, ${hi === null || hi === undefined ? "not reached" : fmt(hi)})`;
}

SECTION.decision = function (body) {
  const d = NP.comparison.decision || {};
  if (!d.available) { body.append(note("The decision view (75_report_decision.sql) is not installed.", "none")); return true; }
  body.append(note(d.rule), note(d.formula));
  if (d.choice) body.append(h("p", {class: "choice"}, h("b", {}, `Pricing model: ${d.choice.pricing_model}`),
    "; lifecycle horizon: " + horizonText(d.choice)));
  if ((d.slos || []).length) {
    body.append(h("ul", {class: "slos"}, d.slos.map((s) => h("li", {},
      h("code", {}, s.slo_name), `: p${fmt(s.slo_percentile)} TTFT <= ${fmt(s.slo_ttft_ms)} ms, `
      + `p${fmt(s.slo_percentile)} TPOT <= ${fmt(s.slo_tpot_ms)} ms — source: ${fmt(s.slo_source)}`))));
  }
  const hw = d.hardware || [];
  if (hw.length) {
    body.append(h("h3", {}, "Across instance types"), note(d.hardware_rule));
    body.append(dataTable({id: "decision-hardware", rows: hw, filters: DECISION_FILTERS.concat([{key: "verdict", label: "verdict"}]),
      columns: [textColumn("decision_section", "section"), textColumn("instance", "instance"),
        textColumn("server_config", "config"), badgeColumn("verdict", "per-point verdict"),
        usdCiColumn("ranked_usd_per_million_output_tokens", "$/M output tokens [95 % CI]"),
        textColumn("ranked_basis", "ranked on"),
        {key: "max_concurrency", label: "highest conc. meeting", cls: "n", cell: (r) => (r.meets === null || r.meets === undefined ? "not measured" : !r.meets ? "none meets" : closedLoopCell(r))},
        ciColumn("output_throughput", "closed-loop output tok/s [95 % CI]"),
        {key: "max_rate_meeting_slo", label: "max sustainable rate req/s [bracket)", cls: "n", cell: rateBracketCell},
        ciColumn("rate_output_throughput", "open-loop output tok/s [95 % CI]"),
        textColumn("family", "family · accelerator", {cell: (r) => (r.family ? (r.accelerator ? `${r.family} · ${r.accelerators}× ${r.accelerator}` : r.family) : "NULL")}),
        textColumn("verdict_note", "why")]}));
    decisionNoise(body, d);
  }
  decisionCost(body, d);  // the pricing model, prices per model, the lifecycle and quality per dollar
  body.append(h("h3", {}, "Per instance type: the highest concurrency and the max rate meeting the SLO"));
  if (!(d.rows || []).length) {
    body.append(noneLine("serving points with an SLO (serve_sweep, finetune_serve, qwen3_attempt, sustained or an imported reference)"));
    beyondText(body);
    return true;
  }
  body.append(dataTable({id: "decision", rows: d.rows, filters: DECISION_FILTERS.concat([{key: "run_id", label: "run"}]),
    columns: [textColumn("instance", "instance"), textColumn("model", "model"), textColumn("server_config", "config"),
      textColumn("shape", "in:out", {value: (r) => shapeText(r), cell: (r) => fmt(shapeText(r))}),
      textColumn("slo_name", "SLO"),
      badgeColumn("meets", "meets", {value: (r) => (r.meets ? 1 : 0), text: (r) => (r.meets ? "meets SLO" : "no point meets")}),
      {key: "max_concurrency", label: "highest conc. meeting", cls: "n", cell: closedLoopCell},
      ciColumn("output_throughput", "output tok/s [95 % CI]"),
      ciColumn("usd_per_million_output_tokens", "$/M output tokens [95 % CI]"),
      {key: "max_rate_meeting_slo", label: "max sustainable rate req/s [bracket)", cls: "n", cell: rateBracketCell},
      numColumn("rate_usd_per_million_output_tokens", "$/M out tok at that rate"),
      textColumn("decision_basis", "use"), ciColumn("goodput", "goodput req/s [95 % CI]"),
      numColumn("p99_ttft_ms", "p99 TTFT ms"), numColumn("p99_tpot_ms", "p99 TPOT ms"),
      textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("note", "note")]}));
  const priced = (d.pricing || []).filter((p) => p.usd_per_hour !== null && p.usd_per_hour !== undefined);
  if (priced.length) {
    body.append(note("Prices: " + priced.map((p) => `${p.instance}: $${fmt(p.usd_per_hour)}/hour`
      + (p.price_date ? ` as of ${p.price_date}` : "") + (p.price_basis === "local" ? " (declared by the run)" : "")).join("; ") + "."));
  }
  beyondText(body);
  return true;
};

/* decision_md.beyond_text_rows: the encoders' and the RAG appliance's decisions in the Decision's words */
function beyondTextRows() {
  const c = NP.comparison, out = [];
  for (const r of ((c.encoders || {}).decision || [])) {
    const met = !!r.meets_slo;
    out.push({instance: r.instance, run_id: r.run_id,
      workload: `encode · ${fmt(r.workload)} (${fmt(r.modality)}, ${fmt(r.model)})`,
      slo: `p99 per call <= ${fmt(r.slo_p99_ms)} ms`, at_slo: met ? `batch ${fmt(r.batch_size)}` : "none meets",
      throughput: met ? `${fmt(r.items_per_s)} items/s` : null, usd_per_1k: r.usd_per_1k_items, per: "item", note: r.note});
  }
  for (const r of ((c.rag || {}).decision || [])) {
    const met = r.concurrency_at_slo !== null && r.concurrency_at_slo !== undefined;
    out.push({instance: r.instance, run_id: r.run_id,
      workload: `rag · ${fmt(r.store)}, ${fmt(r.embedder)}` + (r.reranker ? ` + ${fmt(r.reranker)}` : "") + ` → ${fmt(r.generator)}`,
      slo: `p${fmt(r.slo_percentile)} end to end <= ${fmt(r.slo_end_to_end_ms)} ms`,
      at_slo: met ? `concurrency ${fmt(r.concurrency_at_slo)}` : "none meets",
      throughput: met ? `${fmt(r.queries_per_s_at_slo)} queries/s` : null, usd_per_1k: r.usd_per_1k_queries, per: "query", note: r.note});
  }
  return out.sort((a, b) => (String(a.instance) + a.workload).localeCompare(String(b.instance) + b.workload));
}

function beyondText(body) {
  const rows = beyondTextRows();
  if (!rows.length) return;
  body.append(h("h3", {}, "Beyond text generation: encoders and RAG at their SLO"),
    note("Per instance: each encoder workload at the highest batch size whose p99 latency per call is within its SLO, and the RAG appliance at the highest concurrency whose end-to-end percentile is within its SLO, each with its price per thousand items or queries there (the Encoders and RAG sections carry every point, the numerics gate and the retrieval quality)."));
  body.append(dataTable({id: "decision-beyond-text", rows, filters: [{key: "instance", label: "instance"}],
    columns: [textColumn("instance", "instance"), textColumn("workload", "workload"), textColumn("slo", "SLO"),
      textColumn("at_slo", "highest load meeting"), textColumn("throughput", "throughput there"),
      numColumn("usd_per_1k", "$ per 1k"), textColumn("per", "per"), textColumn("note", "why NULL"), textColumn("run_id", "run")]}));
}

/* ---- the Decision's cost choices (decision_cost_md): pricing models, lifecycle, quality per dollar ------------ */
function horizonText(c) {  // decision_cost_md.horizon_text
  return `${fmt(c.serving_hours)} h of serving, ${fmt(c.redeploys)} redeploys, `
    + (c.finetune ? "a fine-tune and merge first, " : "no fine-tune, ") + `utilization ${fmt(c.utilization)}`;
}

function usdCiColumn(key, label) {  // a $/M whose interval has no upper bound says why it cannot rank
  return ciColumn(key, label, {cell: (r, rows) => {
    const lo = r[key + "_ci_low"], hi = r[key + "_ci_high"];
    if (r[key] !== null && r[key] !== undefined && lo !== null && lo !== undefined && (hi === null || hi === undefined)) {
      return `${fmt(r[key])} [${fmt(lo)}, unbounded: the capacity's lower bound reaches 0, so no interval to rank this $/M against another]`;
    }
    const scale = (rows._scales = rows._scales || {})[key] || (rows._scales[key] = scaleOf(rows, key));
    return ciCell(r[key], lo, hi, scale);
  }});
}

function cellOfLane(lane) {  // accuracy.cell_of: a matrix cell's lane is <lane>@c<digits>
  const m = /^[^@]*@(c[0-9]+)$/.exec(String(lane || ""));
  return m ? m[1] : null;
}

function cheaperButWorse(d) {  // decision_cost_md.cheaper_but_worse: "run|instance|lane|config" -> [worse tasks, baseline]
  const acc = NP.comparison.accuracy || {};
  const out = new Map();
  if (!acc.available) return out;
  const hw = d.hardware || [];
  const entry = (r) => (acc.configs || []).find((e) => e.run_id === r.run_id && e.model === r.model
    && e.server_config === r.server_config && e.variant === "base" && e.cell === cellOfLane(r.lane));
  for (const r of hw) {
    const e = entry(r);
    if (!e || !(e.worse_tasks || []).length || !e.baseline || r.ranked_usd_per_million_output_tokens == null) continue;
    const b = hw.find((x) => x.server_config === e.baseline && x.instance === r.instance && x.run_id === r.run_id
      && x.decision_section === r.decision_section && x.ranked_usd_per_million_output_tokens != null);
    if (b && r.ranked_usd_per_million_output_tokens < b.ranked_usd_per_million_output_tokens) {
      out.set([r.run_id, r.instance, r.lane, r.server_config].join("|"), [e.worse_tasks, e.baseline]);
    }
  }
  return out;
}

function decisionCost(body, d) {
  const worse = cheaperButWorse(d);
  for (const [key, [tasks, base]] of worse) {
    const [, instance, , config] = key.split("|");
    body.append(note(`⚠ cheaper but worse: ${config} on ${instance} is cheaper than its baseline ${base} and worse on ${tasks.join(", ")} (the accuracy lane's paired verdict): not a plain win.`));
  }
  if ((d.pricing_models || []).length) {
    body.append(h("h3", {}, "Pricing models"), note(d.pricing_rule));
    body.append(dataTable({id: "decision-pricing", rows: d.pricing_models,
      filters: [{key: "instance_type", label: "instance"}, {key: "pricing_model", label: "pricing model"}],
      columns: [textColumn("instance_type", "instance"), textColumn("region", "region"),
        textColumn("pricing_model", "pricing model"), numColumn("usd_per_hour", "$/hour"),
        numColumn("effective_usd_per_hour", "effective $/hour"), numColumn("over_on_demand", "x on-demand"),
        textColumn("interruptions", "Spot: instances interrupted /month"), textColumn("price_date", "as of"), textColumn("source", "source"), textColumn("null_reason", "why NULL")]}));
  }
  const ranking = d.ranking_by_pricing || [];  // decision_cost_md._pricing: the models with a type priced, else said
  const priced = ranking.filter((r) => r.pricing_model !== "on-demand" && r.ranking_changed !== null && r.ranking_changed !== undefined);
  const unpriced = distinct(ranking.map((r) => r.pricing_model)).filter((m) => m !== "on-demand" && !priced.some((r) => r.pricing_model === m));
  if (unpriced.length) {
    body.append(note(`Under ${unpriced.join(", ")} no type ranked here has a price (why NULL above): the ranking cannot be compared with on-demand under ${unpriced.length === 1 ? "it" : "them"}.`));
  }
  if (priced.length) {
    body.append(note("Does the ranking change across pricing models? The order of the types priced under each model by $/M at the SLO."));
    body.append(dataTable({id: "decision-pricing-ranking", rows: priced,
      filters: [{key: "pricing_model", label: "pricing model"}],
      columns: [textColumn("decision_group", "group"), textColumn("pricing_model", "pricing model"),
        textColumn("model_order", "order by $/M"), textColumn("on_demand_order", "on-demand order"),
        textColumn("ranking_changed", "ranking", {cell: (r) => (r.ranking_changed === null || r.ranking_changed === undefined
          ? "no type priced: no ranking" : (r.ranking_changed ? "changes" : "same order as on-demand")
            + (r.cheapest_changed ? `; cheapest becomes ${r.cheapest_instance}` : ""))})]}));
  }
  if ((d.lifecycle || []).length) {
    body.append(h("h3", {}, "Lifecycle cost per useful token"),
      note(`Under ${d.choice ? d.choice.pricing_model : "on-demand"}, over ${d.choice ? horizonText(d.choice) : "the default horizon"}. ${d.lifecycle_rule}`));
    const src = (s) => (s === null || s === undefined ? "" : s === "measured" ? "measured" : String(s).split(":")[0]);
    body.append(dataTable({id: "decision-lifecycle", rows: d.lifecycle, filters: DECISION_FILTERS,
      columns: [textColumn("decision_section", "section"), textColumn("server_config", "config"), textColumn("instance", "instance"),
        usdCiColumn("serving_usd_per_million_output_tokens", "serving-only $/M [95 % CI]"),
        usdCiColumn("lifecycle_usd_per_million_output_tokens", "lifecycle $/M [95 % CI]"),
        numColumn("lifecycle_over_serving", "lifecycle / serving"),
        numColumn("cold_compile_s", "cold compile s", {cell: (r) => `${fmt(r.cold_compile_s)} (${src(r.cold_compile_source)})`}),
        numColumn("warm_boot_s", "warm boot s", {cell: (r) => `${fmt(r.warm_boot_s)} (${src(r.warm_boot_source)})`}),
        numColumn("lifecycle_usd", "lifecycle $"), textColumn("lifecycle_note", "note")]}));
  }
  if ((d.quality_cost || []).length) {
    body.append(h("h3", {}, "Quality per dollar"), note(d.quality_rule));
    const rows = d.quality_cost;
    body.append(chart("decision-quality-cost", () => ({
      data: distinct(rows.map((r) => r.task)).map((task, i) => {
        const t = rows.filter((r) => r.task === task);
        return {type: "scatter", mode: "markers", name: task, x: t.map((r) => r.usd_per_million_output_tokens),
          y: t.map((r) => r.accuracy), text: t.map((r) => `${r.instance} · ${r.server_config}${r.pareto ? " (pareto)" : ""}`),
          error_y: {type: "data", symmetric: false, array: t.map((r) => r.accuracy_ci_high - r.accuracy),
            arrayminus: t.map((r) => r.accuracy - r.accuracy_ci_low)},
          marker: {color: colorOf(i), symbol: t.map((r) => (r.pareto ? "circle" : "circle-open"))},
          hovertemplate: "%{text}<br>$/M %{x:.4g}<br>accuracy %{y:.3f}<extra></extra>"};
      }),
      layout: baseLayout("Accuracy (Wilson 95 %) against $/M output tokens at the SLO",
        {xaxis: zeroAxis("$/M output tokens"), yaxis: {title: {text: "accuracy"}, range: [0, 1]}}),
    })));
    body.append(dataTable({id: "decision-quality-cost", rows, filters: [{key: "task", label: "task"}, {key: "instance", label: "instance"}],
      columns: [textColumn("decision_section", "section"), textColumn("task", "task"), textColumn("server_config", "config"),
        textColumn("instance", "instance"), ciColumn("accuracy", "accuracy [Wilson 95 %]"),
        usdCiColumn("usd_per_million_output_tokens", "$/M at the SLO [95 % CI]"),
        textColumn("pareto", "front", {cell: (r) => (r.pareto ? "pareto" : `dominated by ${r.dominated_by}`)
          + (worse.has([r.run_id, r.instance, r.lane, r.server_config].join("|")) ? " ⚠ cheaper but worse" : "")})]}));
  }
}

/* P(cheaper) with run-level noise (decision_md.s_noise; 78_report_decision_noise.sql): per type of a group with
   another candidate, both intervals, the run-to-run component and its source, and P(cheaper) against each other */
function decisionNoise(body, d) {
  const pairs = d.noise || [];
  const options = d.noise_options || [];
  if (!options.length) return;
  const prob = (p) => (p === null || p === undefined ? "NULL" : p > 0.999 ? "> 0.999" : p < 0.001 ? "< 0.001" : p.toFixed(3));
  const interval = (v, lo, hi) => (v === null || v === undefined ? "NULL" : `${fmt(v)} [${fmt(lo)}, ${fmt(hi)}]`);
  const against = (r) => (r.priced === false ? r.note : pairs.filter((p) => p.decision_group === r.decision_group && p.instance === r.instance)
    .map((p) => `vs ${p.other_instance}: ${prob(p.p_cheaper)}, ≥5 % cheaper ${prob(p.p_cheaper_by_margin)} (${p.verdict})`)
    .join("; ") || "no other type");
  const model = (options.find((o) => o.pricing_model) || {}).pricing_model;  // P and its verdict: the Decision's pricing model
  body.append(h("h4", {}, "P(cheaper), run-to-run noise included" + (model ? `, at ${model} prices` : "")), note(d.noise_rule || ""));
  body.append(dataTable({id: "decision-noise", rows: options, filters: DECISION_FILTERS,
    columns: [textColumn("decision_section", "section"), textColumn("server_config", "config"),
      textColumn("instance", "instance"), numColumn("repeats", "runs"),
      textColumn("point_ci_low", "$/M [points' own 95 % CI]", {value: (r) => r.usd_per_million_output_tokens,
        cell: (r) => interval(r.usd_per_million_output_tokens, r.point_ci_low, r.point_ci_high)}),
      textColumn("run_ci_low", "$/M [95 % CI with run-to-run]", {value: (r) => r.usd_per_million_output_tokens,
        cell: (r) => interval(r.usd_per_million_output_tokens, r.run_ci_low, r.run_ci_high)}),
      textColumn("run_sd_source", "run-to-run sd (ln): estimate, 95 % bound used",
        {cell: (r) => `${fmt(r.run_sd_log)}, ${fmt(r.run_sd_upper_log)} (${r.run_sd_source})`}),
      textColumn("p_cheaper", "P(cheaper) against each other type", {value: against, cell: against}),
      textColumn("standing", "verdict with run-to-run noise", {cell: (r) => (r.standing ? `${r.standing}: ${r.standing_note}` : "no other type")}),
      textColumn("run_sd_note", "run-to-run source")]}));
}

/* ---- compile and cold start (rule 3: before any throughput) -------------------------------------------- */
const COLD_START_PHASES = [["instance_start_s", "instance start"], ["os_setup_s", "OS setup"],
  ["agent_registered_s", "agent registered"], ["harness_sync_s", "harness sync"], ["cache_seed_s", "cache seed"],
  ["server_healthy_s", "server healthy"], ["first_token_s", "first token"]];

SECTION.compile = function (body) {
  const comp = NP.comparison.compile || {};
  const rows = (comp.summary || []).filter((r) => ["cold_wall_s", "warm_wall_s", "uncached_wall_s"].some((k) => r[k] !== null && r[k] !== undefined));
  const boots = ((comp.cold_start || {}).boots || []);
  if (!rows.length && !boots.length) { body.append(noneLine("compiles (precompile and serving boots have not run)")); return true; }
  const multi = multiRun();
  if (rows.length) {
    const labels = rows.map((r) => (multi ? r.run_id + " · " : "") + [r.lane, r.model, r.config].filter(Boolean).join(" · "));
    body.append(chart("compile-cold-warm", () => ({
      data: [["cold_wall_s", "cold cache"], ["warm_wall_s", "warm cache"], ["uncached_wall_s", "no cache (JIT backend)"]]
        .map(([k, name], i) => ({type: "bar", name, x: labels, y: rows.map((r) => r[k]), marker: {color: colorOf(i)},
          hovertemplate: "%{x}<br>" + name + ": %{y:.2f} s<extra></extra>"})),
      layout: baseLayout("Compile / server boot: cold vs warm cache (wall seconds)",
        {barmode: "group", yaxis: zeroAxis("wall seconds"), xaxis: {automargin: true, tickfont: {size: 9}}}),
    }), {wide: true}));
    body.append(dataTable({id: "compile", rows, filters: [{key: "run_id", label: "run"}, {key: "what", label: "what"}, {key: "model", label: "model"}],
      columns: [textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("what", "what"), textColumn("model", "model"),
        textColumn("config", "config"), numColumn("cold_wall_s", "cold s"), numColumn("warm_wall_s", "warm s"),
        numColumn("warm_over_cold", "warm/cold"), numColumn("uncached_wall_s", "no-cache s"),
        numColumn("cold_new_artifacts", "new artifacts (cold)"), numColumn("n_failed", "failed")]}));
  }
  if (boots.length) {
    body.append(h("h3", {}, "Cold start"), note("Per box boot, the phases from the start request to the first token (seconds); NULL where a mark is missing."));
    const labels = boots.map((b) => [multi ? b.run_id : null, b.box_role, b.segment, b.instance_type].filter((x) => x !== null && x !== undefined).join(" · "));
    body.append(chart("cold-start", () => ({
      data: COLD_START_PHASES.map(([k, name], i) => ({type: "bar", orientation: "h", name, y: labels,
        x: boots.map((b) => b[k]), marker: {color: colorOf(i)}, hovertemplate: "%{y}<br>" + name + ": %{x:.2f} s<extra></extra>"})),
      layout: baseLayout("Cold start phases per boot (seconds)", {barmode: "stack", xaxis: zeroAxis("seconds"),
        yaxis: {automargin: true}, height: Math.max(220, 90 + 36 * boots.length)}),
    }), {wide: true}));
  }
  return true;
};

/* ---- capacity search: attainment and goodput against offered rate, the knee ------------------------------- */
SECTION.capacity = function (body) {
  const d = NP.comparison.decision || {};
  const pts = (d.capacity_points || []).filter((p) => p.excluded_reason === null || p.excluded_reason === undefined);
  const searches = d.capacity || [];
  if (!pts.length && !searches.length) return false;
  body.append(note(d.rate_rule || ""));
  const key = (p) => [p.run_id, p.lane, p.search_id, p.model, p.server_config].join(" · ");
  const groups = new Map();
  for (const p of pts.slice().sort((a, b) => a.offered_rate - b.offered_rate)) {
    if (!groups.has(key(p))) groups.set(key(p), []);
    groups.get(key(p)).push(p);
  }
  const keys = [...groups.keys()].sort();
  const knees = (search) => searches.filter((s) => key(s) === search);
  const traces = (y, label, fmtY) => keys.map((k, i) => {
    const g = groups.get(k);
    return {type: "scatter", mode: "lines+markers", name: k, x: g.map((p) => p.offered_rate), y: g.map((p) => p[y]),
      marker: {color: colorOf(i), size: 9, symbol: g.map((p) => (p.passed ? "circle" : "x")), line: {width: 1}},
      line: {color: colorOf(i)},
      text: g.map((p) => (p.passed ? "passes" : `fails${p.fail_reason ? ": " + p.fail_reason : ""}`)),
      hovertemplate: `offered %{x} req/s<br>${label}: %{y${fmtY}}<br>%{text}<extra>${esc(k)}</extra>`};
  });
  const shapes = [];
  keys.forEach((k, i) => {
    for (const s of knees(k)) {
      if (s.max_rate_meeting_slo !== null && s.max_rate_meeting_slo !== undefined) {
        shapes.push(vline(s.max_rate_meeting_slo, colorOf(i)));
        if (s.lowest_rate_missing_slo !== null && s.lowest_rate_missing_slo !== undefined) {
          shapes.push(vband(s.max_rate_meeting_slo, s.lowest_rate_missing_slo, colorOf(i)));
        }
      }
    }
  });
  const targets = distinct(searches.map((s) => s.attainment_target));
  const attShapes = shapes.concat(targets.map((t) => ({type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: t, y1: t,
                                                       line: {color: "#999", width: 1, dash: "dot"}})));
  const rateAxis = linAxis("offered rate (req/s)", {rangemode: "tozero"});
  if (pts.length) {
    body.append(h("div", {class: "plots2"},
      chart("capacity-attainment", () => ({data: traces("attained", "attainment", ":.3f"),
        layout: baseLayout("SLO attainment against offered rate (dashed: the knee; band: the bracket; dotted: the target)",
          {xaxis: rateAxis, yaxis: linAxis("SLO attainment", {range: [0, 1.05]}), shapes: attShapes})})),
      chart("capacity-goodput", () => ({data: traces("goodput_tok_s", "goodput tok/s", ":.1f"),
        layout: baseLayout("Goodput (output tok/s of good requests) against offered rate",
          {xaxis: rateAxis, yaxis: zeroAxis("goodput output tok/s"), shapes})}))));
  }
  body.append(dataTable({id: "capacity", rows: searches, filters: [{key: "model", label: "model"}, {key: "instance", label: "instance type"},
    {key: "server_config", label: "config"}, {key: "slo_name", label: "SLO"}],
    columns: [textColumn("run_id", "run"), textColumn("instance", "instance"), textColumn("lane", "lane"), textColumn("model", "model"),
      textColumn("server_config", "config"), textColumn("shape", "in:out", {value: shapeText, cell: (r) => fmt(shapeText(r))}),
      textColumn("slo_name", "SLO"), numColumn("max_rate_meeting_slo", "max rate meeting"),
      numColumn("lowest_rate_missing_slo", "lowest rate missing"), ciColumn("goodput", "goodput req/s [95 % CI]"),
      ciColumn("goodput_tok_s", "goodput tok/s [95 % CI]"), numColumn("points", "points"),
      textColumn("stop_reasons", "stop reasons"), textColumn("lowest_rate_missing_reason", "why the lowest rate missing failed"),
      textColumn("confirmed", "confirmed by a long point"), badgeColumn("outcome", "outcome")]}));
  return true;
};

/* ---- sustained windows and retention ----------------------------------------------------------------------- */
SECTION.sustained = function (body) {
  const s = NP.comparison.sustained || {};
  const windows = s.windows || [];
  if (!windows.length && !(s.retention || []).length) { body.append(noneLine("sustained runs (the sustained lane has not committed)")); return true; }
  const series = new Map();
  for (const w of windows) {
    const k = [multiRun() ? w.run_id : null, w.model, w.server_config, w.point_id].filter(Boolean).join(" · ");
    if (!series.has(k)) series.set(k, []);
    series.get(k).push(w);
  }
  const keys = [...series.keys()].sort();
  const shapes = [];
  keys.forEach((k, i) => {
    const warm = series.get(k).filter((w) => w.warmup).map((w) => w.window);
    if (warm.length) shapes.push(vband(Math.min(...warm) - 0.5, Math.max(...warm) + 0.5, colorOf(i)));
  });
  const trace = (y, label) => keys.map((k, i) => ({type: "scatter", mode: "lines+markers", name: k,
    x: series.get(k).map((w) => w.window), y: series.get(k).map((w) => w[y]), line: {color: colorOf(i)},
    hovertemplate: `window %{x}<br>${label}: %{y:.2f}<extra>${esc(k)}</extra>`}));
  if (windows.length) {
    body.append(h("div", {class: "plots2"},
      chart("sustained-throughput", () => ({data: trace("output_throughput", "output tok/s"),
        layout: baseLayout("Output tok/s per window (shaded: warm-up)", {xaxis: linAxis("window", {dtick: 1}), yaxis: zeroAxis("output tokens/s"), shapes})})),
      chart("sustained-ttft", () => ({data: trace("p99_ttft_ms", "p99 TTFT ms"),
        layout: baseLayout("p99 TTFT per window (ms)", {xaxis: linAxis("window", {dtick: 1}), yaxis: zeroAxis("TTFT p99 (ms)"), shapes})}))));
  }
  if ((s.retention || []).length) {
    body.append(note("Retention: median output throughput of the last K windows over the first K (vs first) and over the best K consecutive (vs peak), each with its 95 % interval from the windows."));
    body.append(dataTable({id: "retention", rows: s.retention, filters: [{key: "run_id", label: "run"}],
      columns: [textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("point_id", "point"),
        numColumn("windows", "windows"), numColumn("retention_k", "K"),
        ciColumn("retention_vs_first", "retention vs first [95 % CI]"), ciColumn("retention_vs_peak", "retention vs peak [95 % CI]"),
        numColumn("first_k_throughput", "first K tok/s"), numColumn("last_k_throughput", "last K tok/s"),
        ciColumn("throughput_slope_per_min", "tok/s slope per min [95 % CI]")]}));
  }
  return true;
};

/* ---- training: loss and tokens/s per step ------------------------------------------------------------------ */
SECTION.training = function (body) {
  const t = NP.comparison.training || {};
  const curves = t.loss_curves || [], steps = NP.data.training_steps || [], runs = t.runs || [];
  const scratch = NP.comparison.from_scratch || {}, scratchRuns = scratch.runs || [];
  if (!curves.length && !runs.length && !scratchRuns.length) { body.append(noneLine("training runs (the sft lane has not committed)")); return true; }
  const label = (r) => [multiRun() ? r.run_id : null, r.lane, r.model].filter(Boolean).join(" · ");
  const plots = h("div", {class: "plots2"});
  if (curves.length) {
    plots.append(chart("training-loss", () => ({
      data: curves.map((c, i) => ({type: "scatter", mode: "lines", name: label(c), x: c.step, y: c.loss, line: {color: colorOf(i)},
        hovertemplate: "step %{x}<br>loss %{y:.4f}<extra>" + esc(label(c)) + "</extra>"})),
      layout: baseLayout("Training loss per optimizer step", {xaxis: linAxis("optimizer step"), yaxis: linAxis("loss")})})));
  }
  const rated = steps.filter((s) => (s.tokens_per_s || []).some((v) => v !== null));
  if (rated.length) {
    plots.append(chart("training-tokens", () => {
      const shapes = [];
      const data = rated.map((s, i) => {
        const run = runs.find((r) => r.run_id === s.run_id && r.lane === s.lane && r.model === s.model);
        if (run && run.tokens_per_s !== null && run.tokens_per_s !== undefined) {
          shapes.push({type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: run.tokens_per_s, y1: run.tokens_per_s,
                       line: {color: colorOf(i), dash: "dash", width: 1}});
        }
        return {type: "scatter", mode: "lines+markers", marker: {size: 4}, name: label(s), x: s.step, y: s.tokens_per_s,
          line: {color: colorOf(i)}, hovertemplate: "step %{x}<br>%{y:.1f} tokens/s<extra>" + esc(label(s)) + "</extra>"};
      });
      return {data, layout: baseLayout("Tokens/s per optimizer step (dashed: the run's headline tokens/s)",
        {xaxis: linAxis("optimizer step"), yaxis: zeroAxis("tokens/s"), shapes})};
    }));
  }
  body.append(plots);
  body.append(dataTable({id: "training", rows: runs, filters: [{key: "run_id", label: "run"}, {key: "model", label: "model"}],
    columns: [textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("model", "model"), textColumn("device", "device"),
      numColumn("steps", "steps"), numColumn("tokens_per_s", "tokens/s"), numColumn("mfu", "MFU"), numColumn("mfu_alt", "MFU (alt peak)"),
      numColumn("first_step_s", "first step s"), numColumn("median_step_s", "median step s"),
      numColumn("first_loss", "first loss"), numColumn("last_loss", "last loss"), textColumn("mfu_null_reason", "why MFU is NULL")]}));
  const saves = t.saves || [];
  if (saves.length) {  // training_md's "Checkpoint saves": report_train_saves as it is
    body.append(h("h3", {}, "Checkpoint saves"), note("Each mid-run save timed alone; share = the saves' seconds over the training loop's."),
      dataTable({id: "training-saves", rows: saves, columns: genericColumns(saves), filters: [{key: "run_id", label: "run"}, {key: "model", label: "model"}]}));
  }
  if (scratchRuns.length) {  // training_md's "From-scratch training": test accuracy per epoch with its Wilson interval
    const epochs = (scratch.epochs || []).filter((e) => e.accuracy !== null && e.accuracy !== undefined);
    const key = (e) => [multiRun() ? e.run_id : null, e.source, e.dataset, e.model].filter(Boolean).join(" · ");
    const series = [...new Set(epochs.map(key))];
    body.append(h("h3", {}, "From-scratch training"));
    if (series.length) {
      body.append(h("div", {class: "plots2"}, chart("scratch-accuracy", () => ({
        data: series.map((name, i) => {
          const rows = epochs.filter((e) => key(e) === name);
          return {type: "scatter", mode: "lines+markers", name, x: rows.map((e) => e.epoch), y: rows.map((e) => e.accuracy),
            line: {color: colorOf(i)}, error_y: {type: "data", symmetric: false, array: rows.map((e) => e.accuracy_ci_high - e.accuracy),
              arrayminus: rows.map((e) => e.accuracy - e.accuracy_ci_low)},
            hovertemplate: "epoch %{x}<br>test accuracy %{y:.3f}<extra>" + esc(name) + "</extra>"};
        }),
        layout: baseLayout("Test accuracy per epoch (bars: 95 % Wilson interval)", {xaxis: linAxis("epoch"), yaxis: zeroAxis("test accuracy")})}))));
    }
    body.append(dataTable({id: "scratch", rows: scratchRuns, columns: genericColumns(scratchRuns),
      filters: ["run_id", "source", "dataset", "model"].filter((f) => scratchRuns.some((r) => f in r)).map((f) => ({key: f, label: f}))}));
  }
  return true;
};

/* ---- deltas tables: variants against their base, runs against the first ----------------------------------- */
function deltaInterval(r) {  // deltas_md.delta_interval_text: the run-level interval where the row has units
  const [lo, hi] = r.run_ci_low !== null && r.run_ci_low !== undefined ? ["run_ci_low", "run_ci_high"] : ["delta_ci_low", "delta_ci_high"];
  return r[lo] === null || r[lo] === undefined ? null : `[${fmt(r[lo])}, ${fmt(r[hi])}]`;
}

function deltaColumns(first) {
  return first.concat([textColumn("metric", "metric"), numColumn("a", "baseline"), numColumn("b", "compared"),
    numColumn("delta", "delta"), numColumn("pct", "%"),
    {key: "ci", label: "95 % CI of delta", value: (r) => r.run_ci_low ?? r.delta_ci_low ?? null, cell: (r) => fmt(deltaInterval(r))},
    textColumn("unit", "unit", {cell: (r) => (r.unit ? `${r.unit} ${r.units_a} v ${r.units_b}` : "one run")}),
    numColumn("run_p_adjusted", "p run"), numColumn("floor_pct", "floor %"),
    badgeColumn("verdict", "verdict", {text: (r) => r.verdict + (r.regression ? " (regression)" : "")})]);
}

const DELTA_FILTERS = [{key: "verdict", label: "verdict"}, {key: "section", label: "section", value: (r) => String(r.metric).split(" · ")[0]}];

SECTION.variants = function (body) {
  const v = NP.comparison.variants || {};
  const rows = [];
  for (const e of v.comparisons || []) {
    for (const r of ((e.deltas || {}).rows || [])) {
      rows.push(Object.assign({}, r, {_run: e.run_id, _pair: `${e.variant} vs ${e.baseline}` + (e.aa_copy ? " (A/A)" : "")}));
    }
  }
  if (!rows.length && !(v.comparisons || []).length) return false;
  body.append(note("Each variant against its base in the same run, at the points both measured: the paired test over repeat pairs, held to the noise floor of an A/A copy where the run declares one, else the practical margin (docs/explanation/compare.md)."));
  const notCompared = (v.comparisons || []).filter((e) => !e.deltas);
  for (const e of notCompared) body.append(note(`${e.run_id}: ${e.variant} vs ${e.baseline} not compared: ${e.note}`, "none"));
  body.append(dataTable({id: "variants", rows, filters: [{key: "_run", label: "run"}, {key: "_pair", label: "A/B"}].concat(DELTA_FILTERS),
    columns: deltaColumns([textColumn("_run", "run"), textColumn("_pair", "variant vs base")])}));
  const configs = v.configs || [];
  if (configs.length) {  // variants_md's booted configs: boots and the weights a lane prepared (report_server_configs)
    const prepared = configs.some((r) => r.quantization);
    body.append(h("h3", {}, "Booted server configs"), dataTable({id: "variant-configs", rows: configs,
      filters: [{key: "run_id", label: "run"}, {key: "lane", label: "lane"}, {key: "config", label: "config"}],
      columns: [textColumn("run_id", "run"), textColumn("lane", "lane"), textColumn("model", "model"), textColumn("config", "config"),
        textColumn("base", "base"), numColumn("boots", "boots"), numColumn("failed_boots", "failed boots"),
        numColumn("cold_boot_s", "cold boot s"), numColumn("warm_boot_s", "warm boot s"), numColumn("points", "points")].concat(prepared ? [
        textColumn("quantization", "weights prepared"), numColumn("quantize_s", "preparation s"),
        numColumn("source_weight_bytes", "bytes before"), numColumn("quantized_weight_bytes", "bytes after"),
        textColumn("quantize_error", "preparation error")] : [])}));
  }
  return true;
};

SECTION.deltas = function (body) {
  const entries = NP.comparison.deltas || [];
  if ((NP.comparison.run_ids || []).length < 2 || !entries.length) return false;
  body.append(note(`Headline deltas against the first run, ${NP.comparison.run_ids[0]}. The verdict rests on what varies between runs (rule 13): with one run per side there is no between-run variance, so a delta is untested unless a measured floor decides.`));
  const rows = [];
  for (const e of entries) for (const r of e.rows || []) rows.push(Object.assign({}, r, {_pair: `${e.run} vs ${e.baseline}`}));
  body.append(dataTable({id: "deltas", rows, filters: [{key: "_pair", label: "runs"}].concat(DELTA_FILTERS),
    columns: deltaColumns([textColumn("_pair", "runs")])}));
  return true;
};

/* ---- accuracy (when comparison.json has it): every table it holds, generically ---------------------------- */
function tablesIn(value, path, out) {
  if (Array.isArray(value)) {
    if (value.length && value.every((r) => r && typeof r === "object" && !Array.isArray(r))) out.push([path, value]);
  } else if (value && typeof value === "object") {
    for (const k of Object.keys(value).sort()) tablesIn(value[k], path ? `${path}.${k}` : k, out);
  }
  return out;
}

SECTION.accuracy = function (body) {
  const keys = Object.keys(NP.comparison).filter((k) => /^accuracy/.test(k)).sort();
  const tables = [];
  for (const k of keys) tablesIn(NP.comparison[k], k, tables);
  if (!tables.length) return false;
  const notes = [];
  const strings = (value, path, depth) => {  // the section's own wording: its text leaves (method, rules), 2 deep
    if (typeof value === "string") notes.push(h("li", {}, h("b", {}, path + ": "), value));
    else if (value && typeof value === "object" && !Array.isArray(value) && depth < 2) {
      for (const k of Object.keys(value).sort()) strings(value[k], k, depth + 1);
    }
  };
  for (const k of keys) strings(NP.comparison[k], k, 0);
  if (notes.length) body.append(h("ul", {class: "note"}, notes));
  for (const [path, rows] of tables) {
    const cols = genericColumns(rows);
    const filters = ["run_id", "model", "task", "variant", "verdict"].filter((f) => rows.some((r) => f in r)).map((f) => ({key: f, label: f}));
    body.append(h("h3", {}, path), dataTable({id: path, rows, columns: cols, filters}));
  }
  return true;
};

/* ---- kernels (when comparison.json has them): the nki lane's tables, generically -------------------------- */
SECTION.kernels = function (body) {
  const tables = tablesIn(NP.comparison.kernels, "kernels", []);
  if (!tables.length) return false;
  body.append(note("Each kernel against its reference: the NKI simulator, the device compile, the device's output and the timed calls against the torch reference; speed-up = reference p50 / kernel p50 (REPORT.md words each verdict)."));
  for (const [path, rows] of tables) {
    const filters = ["run_id", "kernel", "verdict"].filter((f) => rows.some((r) => f in r)).map((f) => ({key: f, label: f}));
    body.append(h("h3", {}, path), dataTable({id: path, rows, columns: genericColumns(rows), filters}));
  }
  return true;
};

/* ---- encoders (when comparison.json has them): the encode lane's tables, generically -------------------------- */
SECTION.encoders = function (body) {
  const tables = tablesIn(NP.comparison.encoders, "encoders", []);
  if (!tables.length) return false;
  body.append(note("Each encoder workload per shape and batch size: placement, the numerics gate against a CPU fp32 reference, and — only where it passed — latency per call, items/s and RTF; then the encode decision per instance (REPORT.md words each exclusion)."));
  for (const [path, rows] of tables) {
    const filters = ["run_id", "workload", "backend", "numerics_verdict", "instance"].filter((f) => rows.some((r) => f in r)).map((f) => ({key: f, label: f}));
    body.append(h("h3", {}, path), dataTable({id: path, rows, columns: genericColumns(rows), filters}));
  }
  return true;
};

/* ---- RAG (when comparison.json has it): the rag lane's tables, generically; REPORT.md words the verdicts ---- */
SECTION.rag = function (body) {
  const tables = tablesIn(NP.comparison.rag, "rag", []);
  if (!tables.length) return false;
  body.append(note("The rag lane: ingest, index, retrieval quality without and with the reranker (hits@k, MRR, the paired verdict), per-stage latency per concurrency, the load against the SLO with its Decision, and the co-residency of the embedder beside the served model."));
  for (const [path, rows] of tables) {
    const filters = ["run_id", "store", "arm", "stage", "verdict"].filter((f) => rows.some((r) => f in r)).map((f) => ({key: f, label: f}));
    body.append(h("h3", {}, path), dataTable({id: path, rows, columns: genericColumns(rows), filters}));
  }
  return true;
};

/* ---- predicted vs observed (when a run registered predictions): predictions_md.py's wording ----------------- */
function predictionRange(r) {  // predictions_md._range: "output_tok_s at c32 380–450"
  if (r.metric === null || r.metric === undefined) return null;
  const at = r.concurrency === null || r.concurrency === undefined ? "" : ` at c${r.concurrency}`;
  const has = (v) => v !== null && v !== undefined;
  const span = has(r.low) && has(r.high) ? `${fmt(r.low)}–${fmt(r.high)}` : has(r.low) ? `≥ ${fmt(r.low)}` : `≤ ${fmt(r.high)}`;
  return `${r.metric}${at} ${span}`;
}

SECTION.predictions = function (body) {
  const p = NP.comparison.predictions;
  if (!p || !(p.rows || []).length) return false;
  body.append(note(`Predictions registered before the run, scored against what it recorded; ${p.rule}.`));
  for (const r of p.rates || []) {
    const scored = (r.held || 0) + (r.missed || 0);
    const pct = r.hit_rate === null || r.hit_rate === undefined ? "" : ` (${Math.round(100 * r.hit_rate)} %)`;
    body.append(h("p", {class: "hit-rate", "data-run": r.run_id},
      h("b", {}, `Hit rate of ${r.run_id}: ${r.held || 0} of ${scored}${pct}`),
      ` — ${r.missed || 0} missed, ${r.not_run || 0} not run; registered ${r.registered_at}` +
      (r.source === "imported" ? " (imported: the source's own verdicts)" : r.registered_before_first_lane ? ", before the run's first lane started" : "")));
  }
  const rows = p.rows.map((r) => Object.assign({}, r, {_range: predictionRange(r)}));
  body.append(dataTable({id: "predictions", rows, columns: [
    textColumn("run_id", "run"), numColumn("prediction", "#"), textColumn("target", "target"),
    textColumn("expected", "expected"), textColumn("observed", "observed"), textColumn("_range", "figure range"),
    numColumn("observed_value", "observed value"),
    textColumn("in_range", "in range", {cell: (r) => (r.in_range === null || r.in_range === undefined ? h("span", {class: "null"}, "NULL") : r.in_range ? "yes" : "no")}),
    badgeColumn("verdict", "verdict", {text: (r) => r.verdict}), textColumn("observed_detail", "what the run recorded"),
    textColumn("note", "note")],
    filters: [{key: "run_id", label: "run"}, {key: "verdict", label: "verdict"}, {key: "expected", label: "expected"}]}));
  return true;
};

/* ---- since the baseline (a run judged against its history at finalize): history_md.py's wording ------------- */
SECTION.baseline = function (body) {
  const b = NP.comparison.baseline;
  if (!b || !(b.runs || []).length) return false;
  for (const r of b.runs) {
    body.append(h("p", {class: "since-baseline", "data-run": r.run_id},
      h("b", {}, `${r.run_id} since the baseline: ${r.faster || 0} faster, ${r.slower || 0} slower, ${r.within_noise || 0} within noise`),
      ` (${r.untested || 0} untested; points, ${r.findings_tested || 0} tested) — ${r.outcome}; baseline ${r.baseline_spec}: ${r.baseline_runs}.`));
  }
  body.append(note(b.rule + "."));
  if ((b.moved || []).length) {
    body.append(dataTable({id: "baseline-moved", rows: b.moved, columns: [
      textColumn("run_id", "run"), textColumn("metric", "metric"), badgeColumn("finding", "finding", {text: (r) => r.finding}),
      numColumn("baseline_value", "baseline"), numColumn("value", "this run"), numColumn("pct", "change %"),
      numColumn("ci_low_pct", "95 % low %"), numColumn("ci_high_pct", "95 % high %"),
      numColumn("familywise_floor_pct", "family-wise floor %")],
      filters: [{key: "run_id", label: "run"}, {key: "finding", label: "finding"}]}));
  }
  return true;
};

/* ---- trend: each series' value per run with its interval, the noise band of each regime, the change points --- */
SECTION.trend = function (body) {
  const t = NP.comparison.trend;
  if (!t || !(t.series || []).length) return false;
  body.append(note(`Method: ${t.method}.`));
  t.series.forEach((s, i) => {
    body.append(h("h3", {}, `${s.series} · ${s.instance_type || "local"} · request ${s.request_fingerprint}`));
    if (s.note) body.append(note(s.note));
    const runs = s.points.map((p) => p.run_id);
    body.append(chart(`trend-${i}`, () => {
      const shapes = [];
      for (const seg of s.segments) {
        if (seg.band_low === null || seg.band_low === undefined) continue;
        shapes.push({type: "rect", xref: "x", yref: "y", x0: runs.indexOf(seg.from_run) - 0.4, x1: runs.indexOf(seg.to_run) + 0.4,
                     y0: seg.band_low, y1: seg.band_high, fillcolor: "rgba(120,120,120,0.15)", line: {width: 0}});
      }
      for (const cp of s.change_points) {
        shapes.push({type: "line", xref: "x", yref: "paper", x0: cp.index - 0.5, x1: cp.index - 0.5, y0: 0, y1: 1,
                     line: {color: "#c0392b", dash: "dash", width: 1}});
      }
      const num = (v) => (typeof v === "number" ? v : null);
      return {
        data: [{type: "scatter", mode: "lines+markers", name: s.metric, x: runs.map((_, k) => k), y: s.points.map((p) => p.value),
          text: runs, line: {color: colorOf(0)},
          error_y: {type: "data", symmetric: false, array: s.points.map((p) => (num(p.ci_high) === null ? null : p.ci_high - p.value)),
                    arrayminus: s.points.map((p) => (num(p.ci_low) === null ? null : p.value - p.ci_low))},
          hovertemplate: "%{text}<br>%{y:.4g}<extra></extra>"}],
        layout: baseLayout(s.series, {shapes, showlegend: false,
          xaxis: linAxis("run", {tickmode: "array", tickvals: runs.map((_, k) => k), ticktext: runs}), yaxis: linAxis(s.metric)})};
    }, {wide: true}));
    for (const cp of s.change_points) {
      body.append(h("p", {class: "change-point"},
        `Change point before ${cp.run_after} (after ${cp.run_before}): ${cp.pct >= 0 ? "+" : ""}${cp.pct.toFixed(1)} %, p = ${fmt(cp.p_value)}; ${cp.what_changed_text}`));
    }
  });
  return true;
};
