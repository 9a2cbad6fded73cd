"""The announcement's rule: one comparison of a run with its baseline is one family of tests, and its false-alarm
rate is held at :data:`FAMILYWISE_ALPHA` per comparison, not per row.

``compare``'s rows are judged one by one (:func:`analytics.report.run_level.judge`): each row's floor is the 95 %
band of the A/A spread, so each row alone calls identical code "slower" up to 2.5 % of the time, and a comparison
of 25 points × 7 headlines finds something in most A/A pairs. A team stops reading such an alert. Here:

- **a finding is a point**, not a row: the headlines of one measurement point (its TTFT, TPOT, E2EL quantiles and
  throughput) move together when one disturbance hits the point, so they count once (:func:`point_of`);
- **the floor is widened for the number of findings tested** (Bonferroni over the m points with a tested row): a
  row's family-wise floor is the A/A band at the two-sided level 1 − α/m instead of 1 − α,
  ``100 · (exp(t_(1 − α/(2m), df) · √(1/r_a + 1/r_b) · s) − 1)`` % (s, df: the family's pooled A/A log sd from
  the history's own runs), never below the row's own floor;
- a point is **slower** when any of its rows is a ``slower`` verdict beyond its family-wise floor (else **faster**
  when one is ``faster`` beyond it, else **within noise**; **untested** when none of its rows was tested); the run
  **regressed** when a point is slower, **improved** when none is and one is faster.

Bonferroni holds the family-wise rate at ≤ α whatever the correlation between points; rows within a point are
correlated, so a point's own rate is at most the sum of its rows' rates and, for the usual strongly correlated
quantiles of one point, close to one row's.

Bonferroni does not hold the rate beside a noisy neighbour: a neighbour that slows one to three points of a run by
30–80 % is a heavy-tailed disturbance the t band does not assume, and the point it hits looks, in that run, like a
regression of that point. A code regression moves every point of a run; a neighbour moves a few. So the **announced
decision is the run's** (:func:`judge_run_shift`):

- the **run-level shift** is one statistic: per point, the mean over its tested rows of the log ratio against the
  baseline (signed so that slower is positive), then the **median over the points**: a few disturbed points
  cannot move it;
- it is judged against the **A/A distribution of that same statistic** from the history: each baseline run in
  turn against the others (leave one out) gives one A/A value of the statistic; their spread ŝ (scaled to the
  spread of one run against the mean of the others, N − 1 degrees of freedom) gives the floor
  ``t_(1 − α/2, N − 1) · ŝ · √(1 + 1/N)`` in log, never below the practical margin, and the shift's 95 % interval
  is the shift ± the same half-width (one statistic: no Bonferroni);
- the run **regressed** when the shift is slower beyond that floor, **improved** when faster beyond it;
- a point found slower or faster family-wise (above) is **announced with the run** only when its direction is the
  run's; otherwise it is **local** (``local slower`` / ``local faster``): a row of the table with its own verdict,
  not announced.

The price: a change confined to a few points, or to one headline of every point (a TTFT-only change moves a
point's mean over its seven headlines by about 2/7 of its size), is reported local, not announced, unless it moves
the run's statistic beyond its floor. With fewer than two baseline runs there is no A/A spread of the statistic:
the floor is the median of the rows' own floors and the shift has no interval. ``benchmarks/familywise_aa.py``
measures both rules on A/A series (a noisy neighbour included); docs/dev/benchmarks.md holds the figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analytics.report.run_level import family_of

FAMILYWISE_ALPHA = 0.05
Finding = Literal["faster", "slower", "within noise", "untested"]
PointFinding = Literal["faster", "slower", "local faster", "local slower", "within noise", "untested"]
Outcome = Literal["regressed", "improved", "unchanged", "untested"]
TESTED = ("faster", "slower", "within noise")


def point_of(metric: str) -> str:
    """The measurement point of a headline key (``section · point · family`` → ``section · point``)."""
    return metric.rsplit(" · ", 1)[0] if " · " in metric else metric


def familywise_floor_pct(
    sd_log: float | None,
    df: int | None,
    findings: int,
    runs_a: int,
    runs_b: int,
    floor_pct: float,
    alpha: float = FAMILYWISE_ALPHA,
) -> float:
    """The row's floor widened for ``findings`` tested points (module docstring); ``floor_pct`` where no A/A
    spread was measured (no sd) or one finding is tested."""
    from analytics.report.stats import t_quantile

    if sd_log is None or findings <= 1:
        return floor_pct
    q = 1.0 - alpha / (2.0 * findings)
    # rows of one run share its state (the machine that night), so the spread pooled over a family's rows holds no
    # more independent information than the runs themselves: its degrees of freedom are at most theirs
    df = min(df, runs_a + runs_b - 2) if df and runs_a + runs_b > 2 else df
    t = t_quantile(q, df) if df else _normal_quantile(q)
    return max(floor_pct, 100.0 * math.expm1(t * math.sqrt(1.0 / runs_a + 1.0 / runs_b) * sd_log))


def _normal_quantile(p: float) -> float:
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class JudgedRow:
    metric: str
    point: str
    family: str
    verdict: str  # compare's per-row verdict
    pct: float | None
    floor_pct: float | None
    familywise_floor_pct: float | None
    finding: Finding


@dataclass(frozen=True)
class RunShift:
    """The run-level shift (module docstring): ``pct`` > 0 is slower."""

    pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    floor_pct: float | None
    finding: Finding
    points: int  # points the median is over
    aa_runs: int  # baseline runs whose leave-one-out values gave the A/A spread (0: the rows' floors)
    basis: str


def signed_log(pct: float, better: str | None) -> float:
    """log(value / baseline), positive when slower (higher is better: the sign is turned)."""
    v = math.log1p(pct / 100.0)
    return -v if better == "higher" else v


def run_statistic(rows: Iterable[dict[str, Any]]) -> tuple[float | None, int]:
    """(median over points of each point's mean signed log ratio, points) over rows with ``metric, pct, better``."""
    per_point: dict[str, list[float]] = {}
    for r in rows:
        pct = r.get("pct")
        if pct is None or not math.isfinite(pct) or pct <= -100.0:
            continue
        per_point.setdefault(point_of(r["metric"]), []).append(signed_log(pct, r.get("better")))
    if not per_point:
        return None, 0
    means = sorted(sum(v) / len(v) for v in per_point.values())
    n = len(means)
    return (means[n // 2] if n % 2 else (means[n // 2 - 1] + means[n // 2]) / 2.0), n


def aa_statistics(baseline_values: dict[str, Sequence[float | None]], better: dict[str, str | None]) -> list[float]:
    """The statistic of each baseline run against the others (leave one out), from ``{metric: [value per run]}``."""
    runs = max((len(v) for v in baseline_values.values()), default=0)
    out: list[float] = []
    for i in range(runs):
        rows = []
        for metric, vals in baseline_values.items():
            mine = vals[i] if i < len(vals) else None
            others = [v for j, v in enumerate(vals) if j != i and v is not None and v > 0]
            if mine is None or mine <= 0 or not others:
                continue
            ref = math.exp(sum(math.log(v) for v in others) / len(others))
            rows.append({"metric": metric, "pct": 100.0 * (mine / ref - 1.0), "better": better.get(metric)})
        stat, _ = run_statistic(rows)
        if stat is not None:
            out.append(stat)
    return out


def judge_run_shift(
    rows: Sequence[dict[str, Any]],
    baseline_values: dict[str, Sequence[float | None]] | None,
    margin_pct: float | None = None,
    alpha: float = FAMILYWISE_ALPHA,
) -> RunShift:
    """The run-level shift of compare's tested rows and its finding against the A/A spread of the same statistic
    over the baseline's runs (``baseline_values``: ``{metric: [value per baseline run]}``)."""
    from analytics.report.run_level import PRACTICAL_MARGIN_PCT
    from analytics.report.stats import t_quantile

    margin = PRACTICAL_MARGIN_PCT if margin_pct is None else margin_pct
    tested = [r for r in rows if r.get("verdict") in TESTED]
    stat, points = run_statistic(tested)
    if stat is None:
        return RunShift(None, None, None, None, "untested", 0, 0, "no tested row")
    better = {r["metric"]: r.get("better") for r in tested}
    aa = aa_statistics({m: v for m, v in (baseline_values or {}).items() if m in better}, better)
    n = len(aa)
    if n >= 2:
        # a leave-one-out value is one run against the mean of the N − 1 others: its variance is σ²(1 + 1/(N − 1))
        # for a statistic linear in the runs, and Σ d² over the N of them estimates σ² · N² / (N − 1)
        s = math.sqrt(sum(d * d for d in aa) * (n - 1) / (n * n))
        half = t_quantile(1.0 - alpha / 2.0, n - 1) * s * math.sqrt(1.0 + 1.0 / n)
        floor = max(margin, 100.0 * math.expm1(half))
        lo, hi = 100.0 * math.expm1(stat - half), 100.0 * math.expm1(stat + half)
        basis = f"A/A spread of the statistic over {n} baseline runs (leave one out, {n - 1} df)"
    else:
        floors = sorted(r["floor_pct"] for r in tested if r.get("floor_pct") is not None)
        floor = max(margin, floors[len(floors) // 2]) if floors else margin
        lo = hi = None
        basis = "the rows' own floor (fewer than 2 baseline runs: no A/A spread of the statistic)"
    bound = math.log1p(floor / 100.0)
    finding: Finding = "slower" if stat >= bound else "faster" if stat <= -bound else "within noise"
    return RunShift(100.0 * math.expm1(stat), lo, hi, floor, finding, points, n, basis)


@dataclass(frozen=True)
class FamilyJudgement:
    rows: list[JudgedRow]
    points: dict[str, PointFinding]  # point -> its finding (local: not the run's direction, not announced)
    outcome: Outcome
    findings_tested: int
    alpha: float
    run: RunShift

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("faster", "slower", "within noise", "untested", "local")}
        for f in self.points.values():
            out["local" if f.startswith("local") else f] += 1
        return out

    def moved(self) -> list[JudgedRow]:
        """The rows behind the announced faster and slower points."""
        return [r for r in self.rows if r.finding in ("faster", "slower") and self.points[r.point] == r.finding]

    def local(self) -> list[JudgedRow]:
        """The rows behind the local findings (a point moved against, or without, the run)."""
        return [r for r in self.rows if r.finding in ("faster", "slower") and self.points[r.point] != r.finding]


def judge_family(
    rows: Iterable[dict[str, Any]],
    floors: Sequence[dict[str, Any]],
    runs_a: int,
    runs_b: int,
    alpha: float = FAMILYWISE_ALPHA,
    baseline_values: dict[str, Sequence[float | None]] | None = None,
    margin_pct: float | None = None,
) -> FamilyJudgement:
    """The family-wise answer over compare's rows (``metric, verdict, pct, floor_pct, better``) with its
    ``noise_floor`` entries (``family, sd_log, df``) for sides of ``runs_a`` and ``runs_b`` runs; the outcome is the
    run-level shift's (:func:`judge_run_shift` over ``baseline_values``, ``{metric: [value per baseline run]}``)."""
    rows = list(rows)
    by_family = {f["family"]: f for f in floors}
    tested = sorted({point_of(r["metric"]) for r in rows if r.get("verdict") in TESTED})
    m = len(tested)
    judged: list[JudgedRow] = []
    for r in rows:
        fam = family_of(r["metric"])
        fl = by_family.get(fam) or {}
        pct, floor = r.get("pct"), r.get("floor_pct")
        fw = (
            None
            if floor is None
            else familywise_floor_pct(fl.get("sd_log"), fl.get("df"), m, runs_a, runs_b, floor, alpha)
        )
        verdict = r.get("verdict") or "untested"
        if verdict in ("faster", "slower") and pct is not None and fw is not None and abs(pct) >= fw:
            finding: Finding = verdict
        elif verdict in TESTED:
            finding = "within noise"
        else:
            finding = "untested"
        judged.append(JudgedRow(r["metric"], point_of(r["metric"]), fam, verdict, pct, floor, fw, finding))
    run = judge_run_shift(rows, baseline_values, margin_pct, alpha)
    points: dict[str, PointFinding] = {}
    for p in sorted({j.point for j in judged}):
        fs = {j.finding for j in judged if j.point == p}
        # the run's direction first: a point that moved both ways within itself is reported with the run
        order = (run.finding, "slower", "faster") if run.finding in ("slower", "faster") else ("slower", "faster")
        f = next((f for f in (*order, "within noise") if f in fs), "untested")
        points[p] = f if f not in ("slower", "faster") or f == run.finding else f"local {f}"  # type: ignore[assignment]
    outcome: Outcome = {"slower": "regressed", "faster": "improved", "within noise": "unchanged"}.get(
        run.finding, "untested"
    )  # type: ignore[assignment]
    return FamilyJudgement(judged, points, outcome, m, alpha, run)


# ---- the run-level series: a new change point ----------------------------------------------------------
SERIES_MIN_SEGMENT = 2  # runs on either side of a change point (analytics.report.trend's segments)
SERIES_ALPHA = 0.05


@dataclass(frozen=True)
class SeriesChange:
    """A change point of the run-level series that the judged run revealed (absent from the series without it)."""

    index: int  # the first run of the new regime
    run_before: str
    run_after: str
    pct: float  # the regime's change, slower > 0
    p_value: float
    finding: Finding  # slower | faster


def run_level_series(
    runs: Sequence[str], values: dict[str, Sequence[float | None]], better: dict[str, str | None]
) -> list[float]:
    """Each run's run-level value in one series: the statistic of :func:`run_statistic` of the run against the
    geometric mean of every run of the series, per metric (``values``: ``{metric: [value per run]}``); a run with
    none of the metrics is NaN."""
    refs = {}
    for m, vals in values.items():
        pos = [v for v in vals if v is not None and v > 0]
        if pos:
            refs[m] = math.exp(sum(math.log(v) for v in pos) / len(pos))
    out = []
    for i in range(len(runs)):
        rows = [
            {"metric": m, "pct": 100.0 * (vals[i] / refs[m] - 1.0), "better": better.get(m)}
            for m, vals in values.items()
            if m in refs and i < len(vals) and vals[i] is not None and vals[i] > 0
        ]
        stat, _ = run_statistic(rows)
        out.append(math.nan if stat is None else stat)
    return out


def new_change_points(runs: Sequence[str], series: Sequence[float]) -> tuple[list[SeriesChange], str | None]:
    """(the change points of ``series`` that the last run revealed, a note when the series cannot say): E-divisive
    means (:func:`analytics.changepoints.find_change_points`, α = 0.05, segments of ≥ 2 runs) over the series with
    and without its last run; a change point is new when the shorter series does not have it. A series too short
    is said in the note, never guessed."""
    from analytics.changepoints import SeriesTooShort, find_change_points, minimum_length

    if not series or not math.isfinite(series[-1]):
        return [], "the run has none of the judged rows: no change points over the run-level series"
    kept = [(r, v) for r, v in zip(runs, series) if math.isfinite(v)]  # a run without the judged rows is left out
    runs, series = [r for r, _ in kept], [v for _, v in kept]
    need = minimum_length(SERIES_MIN_SEGMENT)
    try:
        now = find_change_points(series, alpha=SERIES_ALPHA, min_size=SERIES_MIN_SEGMENT)
    except SeriesTooShort:
        return [], f"run-level series too short for change points: {len(series)} run(s), at least {need} needed"
    before: set[int] = set()
    if len(series) - 1 >= need:
        before = {c.index for c in find_change_points(series[:-1], alpha=SERIES_ALPHA, min_size=SERIES_MIN_SEGMENT)}
    out = []
    for c in now:
        if c.index in before:
            continue
        d = c.mean_after - c.mean_before
        out.append(
            SeriesChange(
                c.index,
                runs[c.index - 1],
                runs[c.index],
                100.0 * math.expm1(d),
                c.p_value,
                "slower" if d > 0 else "faster",
            )
        )
    return out, None
