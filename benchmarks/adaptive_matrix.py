"""The adaptive matrix against the full one on simulated measurements (a benchmark, not a test;
docs/explanation/decision-noise.md states its figures): 4 instance types in one Decision group with known true $/M
(one clearly dominated), each run of a cell drawing its $/M from a lognormal run-to-run spread; the full matrix
runs every cell ``max_repeats`` times, the adaptive one decides wave by wave (control_plane.adaptive.next_wave over
78_report_decision_noise.sql). Per seed: the ranking each ends on, the runs per type, the box-hours and the stops.
``--bracket W``: each run's $/M priced at the passing rate of a capacity search with a bracket W wide (its $/M up to
W above the truth), so a run in contention may be a bisection (a bracket 4 times narrower, half a run's box-hours;
tests/support/adaptive_world.py); the ranking is also compared with the true order.

    .venv/bin/python benchmarks/adaptive_matrix.py [--seeds 20] [--threshold 0.05] [--margin-pct 5] [--max-repeats 5]
                                                  [--run-sd 0.06] [--bracket 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.matrix import AdaptiveSpec  # noqa: E402 - after the repository root is put on sys.path
from tests.support.adaptive_world import TYPES, compare  # noqa: E402 - after the repository root is put on sys.path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--margin-pct", type=float, default=5.0)
    ap.add_argument("--max-repeats", type=int, default=5)
    ap.add_argument("--run-sd", type=float, default=0.06, help="the simulated run-to-run sd of ln $/M")
    ap.add_argument("--bracket", type=float, default=None, help="the capacity search's relative bracket width")
    args = ap.parse_args()
    spec = AdaptiveSpec(threshold=args.threshold, margin_pct=args.margin_pct, max_repeats=args.max_repeats)
    res = compare(range(args.seeds), spec, args.run_sd, args.bracket)
    print(
        f"types (true $/M): {', '.join(f'{t} {v:g}' for t, v in TYPES.items())}; {spec}; run sd {args.run_sd}; "
        f"bracket {args.bracket}"
    )
    for seed, full, ad in res["outcomes"]:
        last = ad.plans[-1].stops
        print(
            f"seed {seed}: full {' < '.join(full.ranking)} ({full.box_hours:.1f} box-h); adaptive "
            f"{' < '.join(ad.ranking)} ({ad.box_hours:.1f} box-h, {len(ad.plans)} waves, runs "
            f"{ad.runs}); last stops: {sorted({s.kind for s in last})}"
        )
    saved = res["saved_box_hours"]
    print(
        f"\nsame ranking as the full matrix: {res['same_ranking']} of {res['seeds']}; same cheapest: "
        f"{res['same_cheapest']} of {res['seeds']}"
    )
    print(
        f"box-hours: full {res['full_box_hours']:.1f}; saved median {statistics.median(saved):.1f} "
        f"(min {min(saved):.1f}, max {max(saved):.1f}), i.e. {statistics.median(saved) / res['full_box_hours']:.0%}"
    )
    print(f"dominated type stopped in wave: {sorted(set(res['dominated_stop_wave']))}")
    print(
        f"the true order: full {res['true_ranking_full']} of {res['seeds']}, adaptive "
        f"{res['true_ranking_adaptive']} of {res['seeds']}; the adaptive runs' uses: {res['uses']}"
    )
    decided = sum(any(s.kind == "decided" for s in ad.plans[-1].stops) for _, _, ad in res["outcomes"])
    print(
        f"decided (the cheapest at least 5 % cheaper than every other at P >= 0.99): {decided} of {res['seeds']}; "
        f"the rest ended at max_repeats"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
