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
quantiles of one point, close to one row's. ``benchmarks/familywise_aa.py`` measures the rate on A/A series (a
noisy neighbour included); docs/dev/benchmarks.md holds the figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analytics.report.run_level import family_of

FAMILYWISE_ALPHA = 0.05
Finding = Literal["faster", "slower", "within noise", "untested"]
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
class FamilyJudgement:
    rows: list[JudgedRow]
    points: dict[str, Finding]  # point -> its finding
    outcome: Outcome
    findings_tested: int
    alpha: float

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("faster", "slower", "within noise", "untested")}
        for f in self.points.values():
            out[f] += 1
        return out

    def moved(self) -> list[JudgedRow]:
        """The rows behind the faster and slower findings."""
        return [r for r in self.rows if r.finding in ("faster", "slower")]


def judge_family(
    rows: Iterable[dict[str, Any]],
    floors: Sequence[dict[str, Any]],
    runs_a: int,
    runs_b: int,
    alpha: float = FAMILYWISE_ALPHA,
) -> FamilyJudgement:
    """The family-wise answer over compare's rows (``metric, verdict, pct, floor_pct``) with its ``noise_floor``
    entries (``family, sd_log, df``) for sides of ``runs_a`` and ``runs_b`` runs."""
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
    points: dict[str, Finding] = {}
    for p in sorted({j.point for j in judged}):
        fs = {j.finding for j in judged if j.point == p}
        points[p] = next((f for f in ("slower", "faster", "within noise") if f in fs), "untested")
    found = set(points.values())
    outcome: Outcome = (
        "regressed"
        if "slower" in found
        else "improved"
        if "faster" in found
        else "unchanged"
        if "within noise" in found
        else "untested"
    )
    return FamilyJudgement(judged, points, outcome, m, alpha)
