"""The run-level verdict: a delta is real only against what varies between runs (rule 13).

Requests of one run share its machine state, neighbours, server boot and caches, so a test over per-request
values answers "did these two runs differ?", not "did the change make a difference?". Here the unit of the test
is the run (or the repeat of a point within a run), and the verdict also needs the delta beyond a measured noise
floor. One function decides (:func:`judge`); ``compare``, REPORT.md's side-by-side, comparison.json and any
future A/B table call it.

- **units** (:func:`choose_units`): for one headline, each side's values per run (a run's repeats of a point
  each give one). When both sides hold ≥ 2 runs, the unit is the *run* (its repeats folded into their geometric
  mean: repeats share their run's state); else, when both sides hold ≥ 2 repeats in all, the unit is the
  *repeat*; else there is one value per side and no between-run information.
- **test** (:func:`unit_test`): Welch's t on the natural log of the per-unit values (unequal variances,
  Welch–Satterthwaite df), its 95 % interval turned back into a ratio B/A − 1. Logs make the delta a ratio
  (what a percentage states), steady the variance between a fast and a slow side and keep a skewed quantile
  or rate closer to normal. Assumes the units are independent draws of one run-level distribution per side
  (runs taken apart or interleaved, not one side's all after the other's on a drifting machine) and that a
  unit's log value is roughly normal (a quantile or rate over many requests is). The p-values of one
  comparison's run-level tests are Holm-adjusted together, as the per-request ones are.
- **noise floor** (:func:`measure_floors`): per metric family (a headline name, e.g. ``p99_ttft_ms``), the
  spread of log per-unit values between A/A units, pooled over the family's rows (within-side variance, df
  weighted), stated as the 95 % band of one new unit against another: ``100 · (exp(t_(0.975, df) · √2 · s) − 1)`` %
  (a prediction interval: few A/A units give a wider floor); sides of r_a and r_b runs are held to the band of
  their means, √(1/r_a + 1/r_b) in place of √2 (:meth:`NoiseFloor.for_sides`). Measured
  from A/A runs named with ``--floor-from`` (the store keeps them; the unit there is the run), else from the
  spread within each side of the comparison itself. The floor in force is the larger of it and the practical
  margin (:data:`PRACTICAL_MARGIN_PCT`, ``--margin-pct``).
- **two configs of one run** (:func:`paired_test`, :func:`paired_floor`; ``compare RUN --config A --vs B``):
  the unit is the repeat pair, the test the paired t on ln(b/a), the floor the A/A pairs of a declared copy.
- **verdict** (:func:`judge`): with units, ``faster``/``slower`` when the adjusted run-level test rejects, the
  interval excludes 0 on the delta's side, and |pct| ≥ the floor; else ``within noise``. With one value per
  side, a measured floor decides (the per-request test must reject too, where one exists, and |pct| ≥ the
  floor); without one the verdict is ``untested`` with the note ``one run per side`` — the per-request test
  stays in the row as context, never as the answer.

Data stage (imports no render module). docs/explanation/compare.md states the rule and the measured rates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Literal, Sequence

ALPHA = 0.05
PRACTICAL_MARGIN_PCT = 2.0  # a change smaller than this is not worth a verdict, however certain
FLOOR_Z = 1.959963984540054  # two-sided 95 % normal quantile
MIN_UNITS = 2  # per side: a variance needs two
UNIT_TEST = "welch t (log per-unit values)"
PAIRED_TEST = "paired t (log B/A per repeat pair)"
Unit = Literal["run", "repeat", "repeat pair"]
Basis = Literal["run-level", "noise floor", "none"]
ONE_RUN_NOTE = ("untested: one run per side — no between-run variance and no measured noise floor (repeat the runs, "
                "e.g. compare A1,A2,A3 B1,B2,B3, set the lane's sweep_repeats, pass --floor-from A/A runs, or "
                "measure both in one interleaved run and compare RUN --config A --vs B); the per-request test is "
                "context only")


def family_of(metric: str) -> str:
    """The metric family of a comparison key: its headline name (``… · p99_ttft_ms`` → ``p99_ttft_ms``)."""
    return metric.rsplit(" · ", 1)[-1]


def center(values: Sequence[float]) -> float | None:
    """One side's value of a headline: the geometric mean of its units (the test's scale), else the mean."""
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return None
    if len(vals) == 1:
        return vals[0]
    if all(v > 0 for v in vals):
        return math.exp(sum(math.log(v) for v in vals) / len(vals))
    return sum(vals) / len(vals)


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def choose_units(side: dict[str, list[float]]) -> tuple[Unit | None, list[float]]:
    """(unit, values) of one side of one headline from {run: [value per repeat]}, before the pair is checked."""
    per_run = {r: [v for v in vs if _numeric(v)] for r, vs in side.items()}
    per_run = {r: vs for r, vs in per_run.items() if vs}
    if len(per_run) >= MIN_UNITS:
        return "run", [center(vs) for _, vs in sorted(per_run.items())]
    flat = [v for _, vs in sorted(per_run.items()) for v in vs]
    return ("repeat" if len(flat) >= MIN_UNITS else None), flat


def pair_units(a: dict[str, list[float]], b: dict[str, list[float]]) -> tuple[Unit | None, list[float], list[float]]:
    """The unit both sides share: the run when both have ≥ 2 runs, else the repeat when both have ≥ 2 values in
    all, else None (each side's values folded to one: no between-run information)."""
    ua, va = choose_units(a)
    ub, vb = choose_units(b)
    if ua == ub == "run":
        return "run", va, vb
    fa = [v for _, vs in sorted(a.items()) for v in vs if _numeric(v)]
    fb = [v for _, vs in sorted(b.items()) for v in vs if _numeric(v)]
    if min(len(fa), len(fb)) >= MIN_UNITS:
        return "repeat", fa, fb
    return None, [center(fa)] if fa else [], [center(fb)] if fb else []


@dataclass(frozen=True)
class UnitTest:
    ratio: float     # center(B) / center(A) − 1 (geometric means)
    ci_low: float    # 95 % interval of the ratio − 1
    ci_high: float
    p_value: float   # two-sided
    df: float


def unit_test(va: Sequence[float], vb: Sequence[float], level: float = 0.95) -> UnitTest | str:
    """Welch's t on log per-unit values; a string (the reason) when the values cannot be tested."""
    from analytics.report.stats import StatsInputError, welch

    if min(len(va), len(vb)) < MIN_UNITS:
        return f"too few units (A {len(va)}, B {len(vb)}; the run-level test needs ≥ {MIN_UNITS} per side)"
    if any(v <= 0 for v in (*va, *vb)):
        return "a non-positive per-unit value: no log-scale test"
    la, lb = [math.log(v) for v in va], [math.log(v) for v in vb]
    try:
        w = welch(la, lb, level)
    except StatsInputError:  # every unit of both sides equal: the delta is exact
        d = sum(lb) / len(lb) - sum(la) / len(la)
        return UnitTest(math.expm1(d), math.expm1(d), math.expm1(d), 1.0 if d == 0 else 0.0, float("inf"))
    return UnitTest(math.expm1(w.delta), math.expm1(w.ci_low), math.expm1(w.ci_high), w.p_value, w.df)


def paired_test(pairs: Sequence[tuple[float, float]], level: float = 0.95) -> UnitTest | str:
    """Two configurations measured in the same repeats (interleaved in one run: ``compare --config A --vs B``):
    the one-sample t on d = ln(b / a) per repeat pair, df = n − 1. A drift or a neighbour that hits both
    members of a pair cancels in d, so what the test sees is the change plus what varies within one cycle of
    the interleave. A string (the reason) when the pairs cannot be tested."""
    from analytics.report.stats import t_cdf, t_quantile

    if len(pairs) < MIN_UNITS:
        return f"too few repeat pairs ({len(pairs)}; the paired test needs ≥ {MIN_UNITS})"
    if any(a <= 0 or b <= 0 for a, b in pairs):
        return "a non-positive per-repeat value: no log-scale test"
    d = [math.log(b / a) for a, b in pairs]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    if sd == 0:
        return UnitTest(math.expm1(mean), math.expm1(mean), math.expm1(mean), 1.0 if mean == 0 else 0.0,
                        float("inf"))
    se, df = sd / math.sqrt(n), float(n - 1)
    half = t_quantile(0.5 + level / 2, df) * se
    p = 2.0 * (1.0 - t_cdf(abs(mean) / se, df))
    return UnitTest(math.expm1(mean), math.expm1(mean - half), math.expm1(mean + half), min(1.0, p), df)


def paired_floor(family: str, diffs: Iterable[Sequence[float]], n_pairs: int, margin_pct: float,
                 source: str) -> NoiseFloor:
    """The floor of a paired comparison: the spread of A/A paired log differences (``diffs``, one sequence
    per row: ln(a'/a) of two identical configs in the same repeats), as the 95 % band of the mean of
    ``n_pairs`` new A/A differences, t_(0.975, df) · sd / √n (the pairs' own sd; df pooled over the rows)."""
    from analytics.report.stats import t_quantile

    ss, df = 0.0, 0
    for d in diffs:
        d = [x for x in d if _numeric(x)]
        if len(d) >= MIN_UNITS:
            m = sum(d) / len(d)
            ss += sum((x - m) ** 2 for x in d)
            df += len(d) - 1
    if not df:
        return margin_floor(family, margin_pct)
    sd = math.sqrt(ss / df)
    spread = 100.0 * math.expm1(t_quantile(0.975, df) * sd / math.sqrt(max(n_pairs, 1)))
    return NoiseFloor(family, max(margin_pct, spread), spread, margin_pct, sd, df, "repeat pair", source)


# ---- the noise floor ------------------------------------------------------------------------------------
def pooled_log_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, int]:
    """(pooled within-group sd of log values, its df) over groups of ≥ 2 positive values; (None, 0) if none."""
    ss, df = 0.0, 0
    for g in groups:
        logs = [math.log(v) for v in g if _numeric(v) and v > 0]
        if len(logs) < MIN_UNITS:
            continue
        m = sum(logs) / len(logs)
        ss += sum((x - m) ** 2 for x in logs)
        df += len(logs) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def spread_pct(sd: float, df: int | None = None, runs_a: int = 1, runs_b: int = 1) -> float:
    """The 95 % band of A/A side against A/A side, in percent, from the sd of log values: the prediction interval
    of the difference of the means of ``runs_a`` and ``runs_b`` new units, t_(0.975, df) · √(1/runs_a + 1/runs_b)
    · sd (one against one: √2; the normal 1.96 when df is None), so a floor measured from few A/A runs is
    wider, as its uncertainty is, and sides of several runs each are held to the spread of their means."""
    from analytics.report.stats import t_quantile

    q = FLOOR_Z if df is None else t_quantile(0.975, df)
    return 100.0 * math.expm1(q * math.sqrt(1.0 / runs_a + 1.0 / runs_b) * sd)


@dataclass(frozen=True)
class NoiseFloor:
    family: str
    floor_pct: float            # the floor in force: max(spread_pct, margin_pct)
    spread_pct: float | None    # measured A/A spread (None: not measured)
    margin_pct: float
    sd_log: float | None
    df: int
    unit: str | None            # what the spread is between: "run" | "repeat"
    source: str

    @property
    def measured(self) -> bool:
        return self.spread_pct is not None

    def for_sides(self, runs_a: int, runs_b: int) -> "NoiseFloor":
        """The floor a comparison of ``runs_a`` against ``runs_b`` runs is held to (``spread_pct`` stays the
        one-run-against-one band)."""
        if self.sd_log is None or (runs_a, runs_b) == (1, 1):
            return self
        band = spread_pct(self.sd_log, self.df or None, runs_a, runs_b)
        return replace(self, floor_pct=max(self.margin_pct, band))

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "floor_pct": self.floor_pct, "spread_pct": self.spread_pct,
                "margin_pct": self.margin_pct, "sd_log": self.sd_log, "df": self.df, "unit": self.unit,
                "measured": self.measured, "source": self.source}


def measure_floors(groups: dict[str, list[Sequence[float]]], margin_pct: float, source: str,
                   unit: dict[str, str | None] | None = None) -> dict[str, NoiseFloor]:
    """{family: NoiseFloor} from A/A groups of per-unit values ({family: [values of one side of one row]})."""
    out = {}
    for family, gs in sorted(groups.items()):
        sd, df = pooled_log_sd(gs)
        spread = spread_pct(sd, df) if sd is not None else None
        out[family] = NoiseFloor(family, max(margin_pct, spread or 0.0), spread, margin_pct, sd, df,
                                 (unit or {}).get(family) if spread is not None else None,
                                 source if spread is not None else "practical margin only (no A/A spread measured)")
    return out


def margin_floor(family: str, margin_pct: float) -> NoiseFloor:
    return NoiseFloor(family, margin_pct, None, margin_pct, None, 0, None,
                      "practical margin only (no A/A spread measured)")


# ---- the verdict ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    verdict: str   # faster | slower | within noise | untested
    basis: Basis
    note: str | None = None


def _real(delta: float, low: float, high: float, p: float, alpha: float) -> bool:
    return p < alpha and (low > 0 or high < 0) and (delta > 0) == (low > 0) and delta != 0


def judge(delta: float | None, pct: float | None, better: str, floor: NoiseFloor, unit: Unit | None,
          run_p_adjusted: float | None = None, run_ci: tuple[float, float] | None = None,
          request_real: bool | None = None, alpha: float = ALPHA) -> Judgement:
    """The one verdict rule (module docstring). ``run_ci`` is the interval of the delta in the metric's units;
    ``request_real`` the per-request rule's answer (None where no per-request test exists)."""
    if delta is None or pct is None:
        return Judgement("untested", "none", "value missing or zero on one side")
    direction = "faster" if (delta > 0) == (better == "higher") else "slower"
    if unit is not None:
        if run_p_adjusted is None or run_ci is None:
            return Judgement("untested", "run-level", "run-level test not computed")
        if not _real(delta, run_ci[0], run_ci[1], run_p_adjusted, alpha):
            return Judgement("within noise", "run-level")
        if abs(pct) < floor.floor_pct:
            return Judgement("within noise", "run-level",
                             f"real between {unit}s but within the noise floor ({floor.floor_pct:.3g} %)")
        return Judgement(direction, "run-level")
    if not floor.measured:
        return Judgement("untested", "none", ONE_RUN_NOTE)
    note = f"one run per side: judged against the measured noise floor {floor.floor_pct:.3g} % ({floor.source})"
    if request_real is False or abs(pct) < floor.floor_pct:
        return Judgement("within noise", "noise floor", note)
    return Judgement(direction, "noise floor", note)
