"""How often a run judged against its baseline announces a change when nothing changed, per comparison: compare's
row-by-row rule, the points' family-wise rule and the run-level rule that decides the announcement
(analytics.report.familywise), on simulated A/A series, quiet and beside a noisy neighbour; and how often each finds
a real 25 % slowdown (a benchmark, not a test).

Each trial is one scheduled run judged against its baseline of BASELINE earlier runs of the same request, as
control_plane.history does it: one run per side of the new run, so each row is judged against the floor measured
from the baseline's own A/A spread (analytics.report.run_level: measure_floors per family, for_sides, judge with the
noise-floor basis), then the family-wise rule over the rows with the baseline's per-run values (the run-level
shift's A/A spread). A run holds POINTS points × the 7 headlines compare
tests (output throughput, p50/p99 TTFT, TPOT and E2EL). The log value of a row in a run is

    run effect (all rows of the run: the machine that night)      N(0, run_sd)
  + point effect (all headlines of one point: one disturbance)     N(0, point_sd)
  + row noise                                                      N(0, row_sd)
  + a noisy neighbour: with probability NEIGHBOUR per run, 1–3 of its points slowed by U(30 %, 80 %) on every
    headline (the disturbance the issue saw: one point, four correlated rows, 67–76 % slower)

the same for the baseline's runs and the judged run (A/A: nothing changed), or with every row of the judged run
25 % slower (power). Printed per scenario, each with a 95 % Wilson interval: the share of A/A comparisons with any
row called faster or slower (compare's rule, what `compare` exits 1 on), with a point found family-wise (local or
not), with the run-level shift beyond its floor either way, and with a regression announced (the run-level shift
slower); then the share of slowed runs compare flags, with a point found slower, and announced.

    .venv/bin/python benchmarks/familywise_aa.py [--trials 2000] [--points 25] [--baseline 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analytics.report.familywise import judge_family  # noqa: E402 - after the repository root is put on sys.path
from analytics.report.run_level import PRACTICAL_MARGIN_PCT, judge, measure_floors  # noqa: E402

FAMILIES = (
    "output_throughput",
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p50_tpot_ms",
    "p99_tpot_ms",
    "p50_e2el_ms",
    "p99_e2el_ms",
)
SCENARIOS = (  # name, run_sd, point_sd, row_sd, neighbour probability
    ("quiet", 0.03, 0.02, 0.02, 0.0),
    ("noisy neighbour 20 %", 0.03, 0.02, 0.02, 0.2),
    ("noisy neighbour 50 %", 0.03, 0.02, 0.02, 0.5),
    ("loud run-to-run", 0.10, 0.05, 0.05, 0.2),
)


def draw_run(
    rng: np.random.Generator, points: int, run_sd: float, point_sd: float, row_sd: float, neighbour: float
) -> np.ndarray:
    """log values [point, family] of one run (module docstring)."""
    v = rng.normal(0, run_sd) + rng.normal(0, point_sd, (points, 1)) + rng.normal(0, row_sd, (points, len(FAMILIES)))
    if rng.random() < neighbour:
        hit = rng.choice(points, size=int(rng.integers(1, 4)), replace=False)
        v[hit, :] += np.log1p(rng.uniform(0.3, 0.8, (len(hit), 1)))
    return v


def trial(rng, points, baseline, scenario, slowdown):
    _, run_sd, point_sd, row_sd, neighbour = scenario
    base = np.stack([draw_run(rng, points, run_sd, point_sd, row_sd, neighbour) for _ in range(baseline)])
    new = draw_run(rng, points, run_sd, point_sd, row_sd, neighbour)
    if slowdown:
        new = new + np.where(np.array([f == "output_throughput" for f in FAMILIES]), -1, 1) * math.log1p(slowdown)
    vals = np.exp(base) * 100.0
    groups = {f: [list(vals[:, p, j]) for p in range(points)] for j, f in enumerate(FAMILIES)}
    floors = {f: fl.for_sides(baseline, 1) for f, fl in measure_floors(groups, PRACTICAL_MARGIN_PCT, "sim").items()}
    rows = []
    for p in range(points):
        for j, f in enumerate(FAMILIES):
            a = math.exp(float(np.mean(base[:, p, j]))) * 100.0
            b = math.exp(float(new[p, j])) * 100.0
            pct = 100.0 * (b / a - 1)
            better = "higher" if f == "output_throughput" else "lower"
            v = judge(b - a, pct, better, floors[f], None).verdict
            rows.append(
                {
                    "metric": f"serving · point {p} · {f}",
                    "verdict": v,
                    "pct": pct,
                    "floor_pct": floors[f].floor_pct,
                    "better": better,
                }
            )
    noise = [fl.to_json() for fl in floors.values()]
    values = {
        f"serving · point {p} · {f}": [float(x) for x in vals[:, p, j]]
        for p in range(points)
        for j, f in enumerate(FAMILIES)
    }
    fam = judge_family(rows, noise, baseline, 1, baseline_values=values)
    any_row = any(r["verdict"] in ("faster", "slower") for r in rows)
    points_rule = any(f in ("slower", "faster") for f in fam.points.values()) or fam.counts()["local"] > 0
    return (
        any_row,
        points_rule,
        fam.outcome in ("regressed", "improved"),
        any(f == "local slower" or f == "slower" for f in fam.points.values()),
        fam.outcome == "regressed",
    )


def wilson(k: int, n: int) -> str:
    z = 1.959963984540054
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return f"{100 * p:5.1f} % [{100 * (c - h):4.1f}, {100 * (c + h):4.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--points", type=int, default=25)
    ap.add_argument("--baseline", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.trials} comparisons per scenario; {args.points} points × {len(FAMILIES)} headlines; "
        f"baseline of {args.baseline} runs against 1"
    )
    print(
        f"{'scenario':<22} {'A/A: compare, any row':<24} {'A/A: points family-wise':<24} {'A/A: run changed':<24} "
        f"{'A/A: regression announced':<26} "
        f"{'25 %: compare':<24} {'25 %: points slower':<24} {'25 %: announced':<24}"
    )
    for sc in SCENARIOS:
        aa = [trial(rng, args.points, args.baseline, sc, 0.0) for _ in range(args.trials)]
        slow = [trial(rng, args.points, args.baseline, sc, 0.25) for _ in range(max(args.trials // 4, 50))]
        n, m = len(aa), len(slow)
        print(
            f"{sc[0]:<22} {wilson(sum(t[0] for t in aa), n):<24} {wilson(sum(t[1] for t in aa), n):<24} "
            f"{wilson(sum(t[2] for t in aa), n):<24} {wilson(sum(t[4] for t in aa), n):<26} "
            f"{wilson(sum(t[0] for t in slow), m):<24} "
            f"{wilson(sum(t[3] for t in slow), m):<24} {wilson(sum(t[4] for t in slow), m):<24}",
            flush=True,
        )


if __name__ == "__main__":
    main()
