"""Headline metrics of a comparison, their deltas between two sides of runs, and whether each delta is real.

Points match across runs on the measurement key (lane, model, server config, shape, concurrency, rate);
what matches on one side only is listed, never dropped silently. :func:`compare_runs` is the plain
arithmetic on comparison.json values. :func:`side_deltas` (``compare A1,A2 B1,B2``; :func:`pair_deltas` for one
run per side; comparison.json ``deltas`` through :func:`deltas_section`) gives, for each shared headline:

    a, b        each side's value: the geometric mean of its units (runs, or a run's repeats of the point)
    run level   Welch's t on the log per-unit values when both sides hold ≥ 2 units, Holm-adjusted over the
                comparison (analytics.report.run_level: the unit, the test, the noise floor, the verdict rule)
    per request Mann–Whitney U / bootstrap (latency), Welch on per-batch rates (throughput), Mann–Whitney over
                per-step tokens/s (training), pooled over each side's runs and repeats, Holm-adjusted
                (analytics.report.request_tests): ``request_verdict``, context only
    verdict     run_level.judge: faster | slower only when real at the run level and beyond the family's
                noise floor; with one run per side, against a measured floor, else "untested: one run per side"
    regression  verdict "slower" and |pct| >= the fail threshold (FAIL_PCT = 5 %, `compare --fail-pct`)
    accuracy    per evaluation (lane, model, variant, config, task) both sides ran: each side's accuracy and the
                paired exact McNemar test on the documents both scored (analytics.report.accuracy), Holm-adjusted
                with the run-level tests; better | worse | within noise; a `worse` by |pct| >= the fail
                threshold is a regression too (``accuracy`` in the entry)

docs/explanation/compare.md states the rule. Part of the report's data stage: it imports no render module
(a delta's text, the verdict summary line and REPORT.md's side-by-side section are
:mod:`analytics.report.deltas_md`'s).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from analytics.report import accuracy
from analytics.report.request_tests import (LATENCY_SOURCE, MIN_BATCHES, MIN_REQUESTS, RATE_SOURCE,  # noqa: F401 - re-exported: compare's callers read them here
                                            batch_rates, latency_test, latency_values, pooled, rate_test,
                                            step_rates, steps_test)
from analytics.report.rows import clean
from analytics.report.run_level import (PRACTICAL_MARGIN_PCT, UNIT_TEST, NoiseFloor, center, choose_units, family_of,
                                        judge, margin_floor, measure_floors, pair_units, unit_test)

SERVING_HEADLINES = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
# tested in the deltas only (REPORT.md's serving tables and `compare_runs` keep the five headlines)
SERVING_TESTED_EXTRA = ("p50_e2el_ms", "p99_e2el_ms")
TRAINING_HEADLINES = ("tokens_per_s", "mfu", "last_loss")
COMPILE_HEADLINES = ("cold_wall_s", "warm_wall_s")
SUSTAINED_HEADLINES = ("retention_vs_first", "retention_vs_peak")

ALPHA = 0.05
FAIL_PCT = 5.0
VERDICTS = ("faster", "slower", "within noise", "untested")
HIGHER_IS_BETTER = ("throughput", "goodput", "tokens_per_s", "mfu", "retention")
UNTESTED_WHY = {
    "compile": "one wall time per compile and run: no per-sample values",
    "training": "one value per training run: no per-sample values (tokens/s is tested over its steps)",
    "sustained": "a ratio of window medians: no per-sample test",
    "aggregate": "aggregate only: the source kept no per-request values",
}


class UnknownRunError(KeyError):
    def __init__(self, run_id: str, known: Iterable[str]):
        super().__init__(f"run {run_id!r} is not in the results; runs found: {', '.join(sorted(known)) or 'none'}")

    def __str__(self) -> str:
        return self.args[0]


def metric_value(row: dict[str, Any], name: str) -> Any:
    """A metric by its vLLM name; ``p50_*`` falls back to vLLM's ``median_*`` spelling."""
    if row.get(name) is None and name.startswith("p50_"):
        return row.get("median_" + name[4:])
    return row.get(name)


def is_headline_point(p: dict[str, Any]) -> bool:
    """rule 7: a point without telemetry, or flagged invalid, stays out of headline tables."""
    return (p.get("telemetry_samples") or 0) > 0 and p.get("valid") is not False


def closed_loop_headline(p: dict[str, Any]) -> bool:
    """A headline point plotted against concurrency: closed loop, not sustained (an open-loop point, an offered
    rate, is plotted against its rate)."""
    return (is_headline_point(p) and p.get("max_concurrency") is not None and p.get("request_rate") is None
            and p.get("mode") != "sustained")


def point_key(p: dict[str, Any]) -> str:
    """The measurement key a point matches on across runs."""
    key = (f"{p.get('lane')} {p.get('model')} {p.get('server_config')} in={p.get('input_len')} "
           f"out={p.get('output_len')} conc={p.get('max_concurrency')}")
    if p.get("request_rate") is not None:
        key += f" rate={p['request_rate']}"
    if p.get("workload"):
        key += f" workload={p['workload']}"
    return key


def metric_name(p: dict[str, Any], m: str) -> str:
    # a coalesced point's TPOT is a delivery rate: keyed apart so it never compares as decode speed
    return f"{m} (delivery rate)" if p.get("coalesced") and "tpot" in m else m


def headline_metrics(c: dict[str, Any], run_id: str,
                     serving: tuple[str, ...] = SERVING_HEADLINES) -> dict[str, Any]:
    """{"section · key · metric": value} for one run."""
    out: dict[str, Any] = {}
    for r in c["compile"]["summary"]:
        if r["run_id"] == run_id:
            for m in COMPILE_HEADLINES:
                out[f"compile · {r['what']} {r.get('model')} {r.get('config') or ''}".rstrip() + f" · {m}"] = r.get(m)
    for r in c["training"]["runs"]:
        if r["run_id"] == run_id:
            for m in TRAINING_HEADLINES:
                out[f"training · {r['lane']} {r['model']} · {m}"] = r.get(m)
    for p in c["serving"]["points"]:
        if p.get("run_id") == run_id and is_headline_point(p):
            for m in serving:
                out[f"serving · {point_key(p)} · {metric_name(p, m)}"] = metric_value(p, m)
    for r in c["sustained"]["retention"]:
        if r.get("run_id") == run_id:
            for m in SUSTAINED_HEADLINES:
                if m in r:
                    out[f"sustained · {r.get('lane')} {r.get('model')} {r.get('point_id')} · {m}"] = r.get(m)
    return out


@dataclass(frozen=True)
class Delta:
    metric: str
    a: Any
    b: Any

    @property
    def delta(self) -> float | None:
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)) \
                and not isinstance(self.a, bool) and not isinstance(self.b, bool):
            return self.b - self.a
        return None

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.a:
            return None
        return 100.0 * d / abs(self.a)


def compare_runs(c: dict[str, Any], run_a: str, run_b: str) -> tuple[list[Delta], list[str], list[str]]:
    """Deltas of B against A on every shared headline key; keys only in A; keys only in B."""
    known = {r["run_id"] for r in c["runs"]}
    for rid in (run_a, run_b):
        if rid not in known:
            raise UnknownRunError(rid, known)
    ha, hb = headline_metrics(c, run_a), headline_metrics(c, run_b)
    shared = sorted(set(ha) & set(hb))
    return ([Delta(k, ha[k], hb[k]) for k in shared], sorted(set(ha) - set(hb)), sorted(set(hb) - set(ha)))


# ---- verdicts: is a delta real? -----------------------------------------------------------------------
def better_of(metric: str) -> str:
    """"higher" for rates, MFU and retention; "lower" for latencies, wall times and loss."""
    return "higher" if any(h in metric for h in HIGHER_IS_BETTER) else "lower"


def decide(delta: float | None, low: float | None, high: float | None, p_value: float | None, better: str,
           alpha: float = ALPHA) -> str:
    """The verdict rule (module docstring): real only when the test rejects and the interval excludes 0."""
    if None in (delta, low, high, p_value):
        return "untested"
    real = p_value < alpha and (low > 0 or high < 0) and (delta > 0) == (low > 0) and delta != 0
    if not real:
        return "within noise"
    return "faster" if (delta > 0) == (better == "higher") else "slower"


def is_regression(row: dict[str, Any], fail_pct: float = FAIL_PCT) -> bool:
    pct = row.get("pct")
    return row.get("verdict") == "slower" and pct is not None and abs(pct) >= fail_pct


def _row(metric: str, a: Any, b: Any) -> dict[str, Any]:
    d = Delta(metric, a, b)
    return {"metric": metric, "a": a, "b": b, "delta": d.delta, "pct": d.pct, "delta_ci_low": None,
            "delta_ci_high": None, "test": None, "interval": None, "p_value": None, "p_adjusted": None,
            "n_a": None, "n_b": None,
            "verdict": "untested", "better": better_of(metric), "regression": False, "note": None}


class SidesOverlapError(ValueError):
    """A run named on both sides of a comparison (or twice on one side)."""


def unit_headlines(c: dict[str, Any], run_id: str,
                   serving: tuple[str, ...] = SERVING_HEADLINES + SERVING_TESTED_EXTRA) -> dict[str, list[Any]]:
    """{metric key: [value per repeat]} of one run: one value per compile, training run and retention row; one per
    repeat of a serving point (sweep_points.repeat_index; a point measured once gives one)."""
    out: dict[str, list[Any]] = {k: [v] for k, v in headline_metrics(c, run_id, serving=()).items()}
    for p in _run_points(c, run_id):
        for m in serving:
            out.setdefault(f"serving · {point_key(p)} · {metric_name(p, m)}", []).append(metric_value(p, m))
    for p in c["serving"].get("aggregate_points") or []:
        if p.get("run_id") == run_id:
            for m in SERVING_HEADLINES:
                out.setdefault(f"serving (aggregate only) · {point_key(p)} · {m}", []).append(metric_value(p, m))
    return out


def _run_points(c: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    pts = [p for p in c["serving"]["points"] if p.get("run_id") == run_id and is_headline_point(p)]
    return sorted(pts, key=lambda p: (p.get("repeat_index") is not None, p.get("repeat_index") or 0))


def _side_points(c: dict[str, Any], runs: list[str]) -> dict[str, list[tuple[str, str, str]]]:
    """{point key: [(run, lane, point_id) of every repeat in the side's runs]}."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for run in runs:
        for p in _run_points(c, run):
            out.setdefault(point_key(p), []).append((run, p["lane"], p["point_id"]))
    return out


def _check_sides(c: dict[str, Any], runs_a: list[str], runs_b: list[str], floor_runs: list[str]) -> None:
    known = {r["run_id"] for r in c["runs"]}
    for rid in (*runs_a, *runs_b, *floor_runs):
        if rid not in known:
            raise UnknownRunError(rid, known)
    if not runs_a or not runs_b:
        raise SidesOverlapError("each side of a comparison needs at least one run")
    seen = [*runs_a, *runs_b]
    twice = sorted({r for r in seen if seen.count(r) > 1})
    if twice:
        raise SidesOverlapError(f"run(s) {', '.join(twice)} named twice: each run belongs to one side")


def _floors(c: dict[str, Any], groups: dict[str, list], unit_of: dict[str, str], floor_runs: list[str],
            tested: tuple[str, ...], margin_pct: float) -> dict[str, NoiseFloor]:
    """The floor per family: from the --floor-from A/A runs where they measure it, else from the spread within
    each side of this comparison, else the practical margin."""
    own = measure_floors(groups, margin_pct, "A/A spread between units within each side of this comparison",
                         unit_of)
    if not floor_runs:
        return own
    heads = {r: unit_headlines(c, r, tested) for r in floor_runs}
    fg: dict[str, list] = {}
    fu: dict[str, str] = {}
    for key in sorted(set().union(*heads.values())):
        unit, vals = choose_units({r: h[key] for r, h in heads.items() if key in h})
        if unit is not None:
            fg.setdefault(family_of(key), []).append(vals)
            fu[family_of(key)] = unit
    aa = measure_floors(fg, margin_pct, f"A/A runs {', '.join(floor_runs)} (--floor-from)", fu)
    return {f: aa[f] if f in aa and aa[f].measured else own.get(f) or aa[f] for f in sorted({*own, *aa})}


def side_deltas(c: dict[str, Any], runs_a: Iterable[str], runs_b: Iterable[str], con: Any = None,
                fail_pct: float = FAIL_PCT, floor_runs: Iterable[str] = (),
                margin_pct: float = PRACTICAL_MARGIN_PCT) -> dict[str, Any]:
    """The ``deltas`` entry of side B (one or more runs) against side A: every shared headline, its run-level
    test where the sides hold ≥ 2 units, the per-request test as context, the noise floor and the verdict
    (:func:`analytics.report.run_level.judge`). Without ``con`` no per-sample values are read."""
    runs_a, runs_b, floor_runs = list(runs_a), list(runs_b), list(floor_runs)
    _check_sides(c, runs_a, runs_b, floor_runs)
    tested = SERVING_HEADLINES + SERVING_TESTED_EXTRA
    ha = {r: unit_headlines(c, r, tested) for r in runs_a}
    hb = {r: unit_headlines(c, r, tested) for r in runs_b}
    keys_a, keys_b = set().union(*ha.values()), set().union(*hb.values())
    points = {"a": _side_points(c, runs_a), "b": _side_points(c, runs_b)}
    matched = sorted(set(points["a"]) & set(points["b"]))
    lat = rates = steps = None
    if con is not None and matched:
        ids = sorted({k[2] for s in points.values() for pk in matched for k in s[pk]})
        lat, rates = latency_values(con, runs_a + runs_b, ids), batch_rates(con, runs_a + runs_b, ids)
    if con is not None and any(k.startswith("training · ") and k.endswith(" · tokens_per_s") for k in keys_a):
        steps = step_rates(con, runs_a + runs_b)
    trained = {(r["run_id"], f"{r['lane']} {r['model']}"): (r["lane"], r["model"]) for r in c["training"]["runs"]}
    rows: dict[str, dict[str, Any]] = {}
    cache: dict = {}
    groups: dict[str, list] = {}
    unit_of: dict[str, str] = {}
    for metric in sorted(keys_a & keys_b):
        unit, va, vb = pair_units({r: h[metric] for r, h in ha.items() if metric in h},
                                  {r: h[metric] for r, h in hb.items() if metric in h})
        row = rows[metric] = _row(metric, center(va), center(vb))
        row.update(unit=unit, units_a=len(va), units_b=len(vb), run_test=None, run_p_value=None,
                   run_p_adjusted=None, run_ci_low=None, run_ci_high=None, floor_pct=None, basis=None,
                   request_verdict="untested", _runs_a=sum(metric in h for h in ha.values()),
                   _runs_b=sum(metric in h for h in hb.values()))
        if unit is not None and row["delta"] is not None:
            groups.setdefault(family_of(metric), []).extend([va, vb])
            unit_of[family_of(metric)] = unit
            t = unit_test(va, vb)
            if isinstance(t, str):
                row["run_note"] = t
            else:
                row.update(run_test=UNIT_TEST, run_p_value=t.p_value, run_ci_low=row["a"] * t.ci_low,
                           run_ci_high=row["a"] * t.ci_high, _run_test_id=("run", metric))
        _request_test(row, metric, points, lat, rates, steps, trained, runs_a, runs_b, con, cache)
    tests = adjust_p_values(rows.values(), fail_pct)
    acc = accuracy.run_tests(con, runs_a, runs_b)
    run_tests = _adjust_run_p_values(rows.values(), acc["rows"], f"{','.join(runs_b)} vs {','.join(runs_a)}")
    accuracy.decide(acc["rows"], fail_pct)
    floors = _floors(c, groups, unit_of, floor_runs, tested, margin_pct)
    for row in rows.values():
        fam = family_of(row["metric"])
        floor = (floors.get(fam) or margin_floor(fam, margin_pct)).for_sides(row.pop("_runs_a"), row.pop("_runs_b"))
        _decide(row, floor, fail_pct)
    used = sorted({family_of(m) for m in rows})
    units = [r["unit"] or "none" for r in rows.values()]
    return {"baseline": ",".join(runs_a), "run": ",".join(runs_b), "baseline_runs": runs_a, "compared_runs": runs_b,
            "floor_runs": floor_runs, "alpha": ALPHA, "fail_pct": fail_pct, "correction": "holm",
            "tests": tests, "run_tests": run_tests, "run_test": UNIT_TEST, "margin_pct": margin_pct,
            "units": {u: units.count(u) for u in ("run", "repeat", "none")},
            "units_per_side": {"a": max([r["units_a"] for r in rows.values()] or [0]),
                               "b": max([r["units_b"] for r in rows.values()] or [0])},
            "noise_floor": [(floors.get(f) or margin_floor(f, margin_pct)).to_json() for f in used],
            "rows": [rows[k] for k in sorted(rows)],
            "only_baseline": sorted(keys_a - keys_b) + acc["only_baseline"],
            "only_run": sorted(keys_b - keys_a) + acc["only_run"],
            "accuracy": acc["rows"], "accuracy_tests": len(accuracy.tested(acc["rows"])),
            "accuracy_note": acc["note"]}


def _decide(row: dict[str, Any], floor: NoiseFloor, fail_pct: float) -> None:
    """A row's verdict by :func:`run_level.judge` against ``floor``, its notes and whether it is a regression."""
    run_ci = None if row["run_ci_low"] is None else (row["run_ci_low"], row["run_ci_high"])
    request_real = None if row["p_adjusted"] is None else row["request_verdict"] in ("faster", "slower")
    j = judge(row["delta"], row["pct"], row["better"], floor, row["unit"], row["run_p_adjusted"], run_ci,
              request_real)
    notes = [n for n in (j.note, row.pop("run_note", None), row["note"]) if n]
    row.update(verdict=j.verdict, basis=j.basis, floor_pct=floor.floor_pct, note="; ".join(notes) or None)
    row["regression"] = is_regression(row, fail_pct)


def _request_test(row: dict[str, Any], metric: str, points: dict, lat: Any, rates: Any, steps: Any, trained: dict,
                  runs_a: list[str], runs_b: list[str], con: Any, cache: dict) -> None:
    """The per-request (per-batch, per-step) test of one row, pooled over each side's runs and repeats."""
    section, *rest = metric.split(" · ")
    if section == "training" and rest[1] == "tokens_per_s" and steps is not None and row["delta"] is not None:
        side: list[list[float]] = [[], []]
        for i, runs in enumerate((runs_a, runs_b)):
            for r in runs:
                if (r, rest[0]) in trained:
                    side[i] += steps.get((r, *trained[(r, rest[0])]), [])
        steps_test(row, *side)
        return
    if section != "serving":
        row["note"] = UNTESTED_WHY["aggregate" if "aggregate" in section else section]
        return
    pk, name = rest[0], rest[1].split(" ")[0]
    if row["delta"] is None:
        row["note"] = "value missing in one run"
        return
    if con is None:
        row["note"] = "per-sample values not read (no results connection)"
        return
    ka, kb = points["a"][pk], points["b"][pk]
    if name in LATENCY_SOURCE:
        col, q = LATENCY_SOURCE[name]
        latency_test(row, pooled(lat, ka, col), pooled(lat, kb, col), q, cache, (pk, col))
    elif name in RATE_SOURCE and rates is None:
        row["note"] = "view point_rate_batches is not installed: no per-batch rates"
    elif name in RATE_SOURCE:
        col = RATE_SOURCE[name]
        rate_test(row, pooled(rates, ka, col), pooled(rates, kb, col))


def pair_deltas(c: dict[str, Any], run_a: str, run_b: str, con: Any = None, fail_pct: float = FAIL_PCT,
                **kw: Any) -> dict[str, Any]:
    """The ``deltas`` entry of run B against run A (:func:`side_deltas` with one run per side)."""
    return side_deltas(c, [run_a], [run_b], con, fail_pct, **kw)


def adjust_p_values(rows: Iterable[dict[str, Any]], fail_pct: float = FAIL_PCT) -> int:
    """Holm-adjust the comparison's distinct per-request tests together, then decide each tested row by the
    per-request rule (``request_verdict``, context for the verdict); the number of tests."""
    from analytics.report.stats import holm

    rows = list(rows)
    tests: dict[Any, float] = {}
    for row in rows:
        if row.get("_test_id") is not None:
            tests.setdefault(row["_test_id"], row["p_value"])
    adjusted = dict(zip(tests, holm(list(tests.values()))))
    for row in rows:
        test_id = row.pop("_test_id", None)
        if test_id is None:
            continue
        row["p_adjusted"] = adjusted[test_id]
        row["request_verdict"] = decide(row["delta"], row["delta_ci_low"], row["delta_ci_high"], row["p_adjusted"],
                                        row["better"])
    return len(tests)


def _adjust_run_p_values(rows: Iterable[dict[str, Any]], accuracy_tests: Iterable[dict[str, Any]] = (),
                         family: str = "") -> int:
    """Holm over the comparison's run-level tests (one per row) and its accuracy tests together (each paired
    McNemar test, analytics.report.accuracy: they decide their verdicts as the run-level tests do); the number of
    run-level tests. Each accuracy test gets p_holm, holm_tests and holm_family."""
    from analytics.report.accuracy import tested
    from analytics.report.stats import holm

    rows = [r for r in rows if r.get("_run_test_id") is not None]
    acc = list(accuracy_tests)
    extra = tested(acc)
    adjusted = holm([r["run_p_value"] for r in rows] + [t["mcnemar_p"] for t in extra])
    for row, p in zip(rows, adjusted):
        row.pop("_run_test_id")
        row["run_p_adjusted"] = p
    for t, p in zip(extra, adjusted[len(rows):]):
        t["p_holm"] = p
    for t in acc:
        t.setdefault("p_holm", None)
        t.update(holm_tests=len(adjusted), holm_family=f"{family} ({len(rows)} run-level test(s) and "
                                                       f"{len(extra)} accuracy test(s))")
    return len(rows)


def deltas_section(con: Any, c: dict[str, Any], fail_pct: float = FAIL_PCT) -> list[dict[str, Any]]:
    """comparison.json ``deltas``: one entry per run after the first, against the first (runs found only)."""
    known = {r["run_id"] for r in c["runs"]}
    ids = [r for r in c["run_ids"] if r in known]
    return [clean(pair_deltas(c, ids[0], other, con, fail_pct)) for other in ids[1:]]

def verdict_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}


# ---- two configurations of the same runs ------------------------------------------------------------------
class UnknownConfigError(KeyError):
    def __init__(self, config: str, known: Iterable[str], runs: Iterable[str]):
        super().__init__(f"server config {config!r} has no headline point in run(s) {', '.join(runs)}; configs "
                         f"found: {', '.join(sorted(known)) or 'none'}")

    def __str__(self) -> str:
        return self.args[0]


def _config_values(c: dict[str, Any], runs: list[str], config: str, label: str, tested: tuple[str, ...]):
    """({metric key: {(run, repeat): value}}, {point key: [(run, lane, point_id)]}) of one config's points, keyed
    with the server config replaced by ``label`` so both configs' points share their keys."""
    values: dict[str, dict[tuple[str, int], Any]] = {}
    points: dict[str, list[tuple[str, str, str]]] = {}
    for run in runs:
        for p in _run_points(c, run):
            if p.get("server_config") != config:
                continue
            pk = point_key({**p, "server_config": label})
            points.setdefault(pk, []).append((run, p["lane"], p["point_id"]))
            rep = (run, int(p.get("repeat_index") or 0))
            for m in tested:
                values.setdefault(f"serving · {pk} · {metric_name(p, m)}", {})[rep] = metric_value(p, m)
    return values, points


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def config_deltas(c: dict[str, Any], runs: Iterable[str], config_a: str, config_b: str, con: Any = None,
                  fail_pct: float = FAIL_PCT, floor_config: str | None = None,
                  margin_pct: float = PRACTICAL_MARGIN_PCT) -> dict[str, Any]:
    """The ``deltas`` entry of server config B against config A measured in the same run(s) (a variant A/B,
    ``compare RUN --config A --vs B``): points match on everything but the config, and each repeat of A pairs
    with the same repeat of B in the same run. The run-level test is the **paired** t over those repeat pairs
    (:func:`analytics.report.run_level.paired_test`): what the run shares cancels within a pair, which is why
    an interleaved (better: balanced) sweep can find a change that runs measured apart cannot. The noise
    floor is the A/A spread of ``floor_config`` (an identical copy of A declared in the same runs) against A,
    else the practical margin. The verdict rule is :func:`run_level.judge`'s, the per-request test context."""
    from analytics.report.run_level import PAIRED_TEST

    runs = list(runs)
    _check_config_sides(c, runs, config_a, config_b, floor_config)
    tested = SERVING_HEADLINES + SERVING_TESTED_EXTRA
    label = f"{config_a} vs {config_b}"
    va, pa = _config_values(c, runs, config_a, label, tested)
    vb, pb = _config_values(c, runs, config_b, label, tested)
    vf = _config_values(c, runs, floor_config, label, tested)[0] if floor_config else {}
    points = {"a": pa, "b": pb}
    matched = sorted(set(pa) & set(pb))
    lat = rates = None
    if con is not None and matched:
        ids = sorted({k[2] for s in points.values() for pk in matched for k in s[pk]})
        lat, rates = latency_values(con, runs, ids), batch_rates(con, runs, ids)
    rows: dict[str, dict[str, Any]] = {}
    aa_diffs: dict[str, list[list[float]]] = {}
    n_pairs: dict[str, int] = {}
    cache: dict = {}
    for metric in sorted(set(va) & set(vb)):
        row = rows[metric] = _paired_row(metric, va[metric], vb[metric])
        n_pairs[metric] = row["units_a"]
        if metric in vf:
            aa = [math.log(float(vf[metric][k]) / float(va[metric][k])) for k in sorted(set(va[metric]) & set(vf[metric]))
                  if _num(va[metric][k]) and _num(vf[metric][k]) and va[metric][k] > 0 and vf[metric][k] > 0]
            aa_diffs.setdefault(family_of(metric), []).append(aa)
        _request_test(row, metric, points, lat, rates, None, {}, runs, runs, con, cache)
    tests = adjust_p_values(rows.values(), fail_pct)
    acc = accuracy.config_tests(con, runs, config_a, config_b)
    run_tests = _adjust_run_p_values(rows.values(), acc, f"{config_b} vs {config_a} in {', '.join(runs)}")
    accuracy.decide(acc, fail_pct)
    used = _decide_paired(rows, aa_diffs, n_pairs, config_a, floor_config, margin_pct, fail_pct)
    units = [r["unit"] or "none" for r in rows.values()]
    return clean({
        "kind": "configs", "baseline": config_a, "run": config_b, "runs": runs, "configs": [config_a, config_b],
        "floor_config": floor_config, "baseline_runs": runs, "compared_runs": runs, "floor_runs": [],
        "alpha": ALPHA, "fail_pct": fail_pct, "correction": "holm", "tests": tests, "run_tests": run_tests,
        "run_test": PAIRED_TEST, "margin_pct": margin_pct,
        "units": {u: units.count(u) for u in ("repeat pair", "none")},
        "units_per_side": {"a": max([r["units_a"] for r in rows.values()] or [0]),
                           "b": max([r["units_b"] for r in rows.values()] or [0])},
        "noise_floor": [used[f].to_json() for f in sorted(used)],
        "floor_heading": (f"noise floor (A/A spread of {floor_config} against {config_a} in the same repeats: the 95 % "
                          f"band of one A/A pair; a row is held to the band of the mean of its pairs, its floor %; "
                          f"at least the {margin_pct:g} % margin):" if floor_config else None),
        "rows": [rows[k] for k in sorted(rows)],
        "only_baseline": sorted(set(va) - set(vb)), "only_run": sorted(set(vb) - set(va)),
        "accuracy": acc, "accuracy_tests": len(accuracy.tested(acc))})


def _check_config_sides(c: dict[str, Any], runs: list[str], config_a: str, config_b: str,
                        floor_config: str | None) -> None:
    """Every run known and named once; A, B (and the floor's copy) three different configs, each with points in
    the runs."""
    known = {r["run_id"] for r in c["runs"]}
    for rid in runs:
        if rid not in known:
            raise UnknownRunError(rid, known)
    if len(set(runs)) != len(runs):
        raise SidesOverlapError("a run named twice")
    names = [x for x in (config_a, config_b, floor_config) if x is not None]
    if len(set(names)) != len(names):
        raise SidesOverlapError(f"--config, --vs and --floor-vs name three different configs, got {', '.join(names)}")
    configs = {p.get("server_config") for r in runs for p in _run_points(c, r)}
    for cfg in names:
        if cfg not in configs:
            raise UnknownConfigError(cfg, {x for x in configs if x}, runs)


def _paired_row(metric: str, a: dict[tuple[str, int], Any], b: dict[tuple[str, int], Any]) -> dict[str, Any]:
    """One metric's row of a config A/B: A's and B's values paired by (run, repeat), the paired t over the pairs
    when there are two or more (``units_a``/``units_b``: the pairs)."""
    from analytics.report.run_level import PAIRED_TEST, paired_test

    common = sorted(set(a) & set(b))
    pairs = [(float(a[k]), float(b[k])) for k in common if _num(a[k]) and _num(b[k])]
    a_vals = [x for x, _ in pairs] or [v for v in a.values() if _num(v)]
    b_vals = [y for _, y in pairs] or [v for v in b.values() if _num(v)]
    unit = "repeat pair" if len(pairs) >= 2 else None
    row = _row(metric, center(a_vals), center(b_vals))
    row.update(unit=unit, units_a=len(pairs), units_b=len(pairs), run_test=None, run_p_value=None,
               run_p_adjusted=None, run_ci_low=None, run_ci_high=None, floor_pct=None, basis=None,
               request_verdict="untested")
    if unit is not None and row["delta"] is not None:
        t = paired_test(pairs)
        if isinstance(t, str):
            row["run_note"] = t
        else:
            row.update(run_test=PAIRED_TEST, run_p_value=t.p_value, run_ci_low=row["a"] * t.ci_low,
                       run_ci_high=row["a"] * t.ci_high, _run_test_id=("paired", metric))
    return row


def _decide_paired(rows: dict[str, dict[str, Any]], aa_diffs: dict[str, list[list[float]]], n_pairs: dict[str, int],
                   config_a: str, floor_config: str | None, margin_pct: float,
                   fail_pct: float) -> dict[str, NoiseFloor]:
    """Each row's verdict against its noise floor: the A/A pairs' band for its number of pairs (``floor_config``),
    else the practical margin; the floor of each family (for one pair), as the comparison shows it."""
    from analytics.report.run_level import paired_floor

    source = (f"A/A pairs of {floor_config} against {config_a} in the same repeats (--floor-vs)" if floor_config
              else None)
    used = {fam: paired_floor(fam, aa_diffs.get(fam, []), 1, margin_pct, source) if source
            else margin_floor(fam, margin_pct) for fam in sorted({family_of(m) for m in rows})}
    for metric, row in rows.items():
        fam = family_of(metric)
        floor = (paired_floor(fam, aa_diffs.get(fam, []), max(n_pairs[metric], 1), margin_pct, source)
                 if source else used[fam])
        _decide(row, floor, fail_pct)
    return used
