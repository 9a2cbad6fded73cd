"""How often compare's per-request rule calls noise real, and how often it finds a real shift (a benchmark, not a
test). Synthetic draws are independent requests by construction: this measures the per-request tests
(``request_verdict``); the run-level verdict on real runs is benchmarks/compare_aa.py's.

For each pair, three synthetic runs at a full sweep's size (2 serving lanes × 2 server configs × 5 concurrencies =
20 points, REQUESTS requests each, through the real store and views): A and B drawn from one distribution
(different seeds), and S = B's draws with every TTFT SHIFT longer. Printed per pair and in total:

  same distribution  tested rows, rows that would be real on their own test (raw p < 0.05 and the interval
                     excluding 0), rows real after the Holm adjustment (the verdicts `compare` gives), regressions
                     (exit 1) at the default 5 % threshold
  shifted TTFT       how many of the p50 TTFT rows come out `slower` (power), and the exit code

    .venv/bin/python benchmarks/compare_noise.py [--pairs 5] [--requests 1000] [--shift 0.10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analytics.report.compare import ALPHA, FAIL_PCT, pair_deltas  # noqa: E402 - after the repository root is put on sys.path
from analytics.report.comparison import build_comparison  # noqa: E402 - after the repository root is put on sys.path
from analytics.store import LocalStore  # noqa: E402 - after the repository root is put on sys.path
from analytics.views import connect  # noqa: E402 - after the repository root is put on sys.path
from tests.support import synthetic  # noqa: E402 - after the repository root is put on sys.path


def write(store: LocalStore, run_id: str, seed: int, factor: float, requests: int) -> None:
    synthetic.write_synthetic_run(
        store,
        synthetic.SyntheticRun(
            run_id=run_id,
            seed=seed,
            lanes=("serve_sweep", "finetune_serve"),
            server_configs=("A", "B"),
            concurrencies=(1, 2, 4, 8, 16),
            requests_per_point=requests,
            failure_rate=0.0,
            ttft_factor=factor,
        ),
    )


def request_regression(row: dict) -> bool:
    """The per-request rule's regression (``request_verdict``): what this benchmark measures on independent draws.
    One synthetic run per side has no run-level verdict (benchmarks/compare_aa.py measures that on real runs)."""
    return row["request_verdict"] == "slower" and abs(row["pct"] or 0) >= FAIL_PCT


def entry(store: LocalStore, a: str, b: str) -> dict:
    con = connect(store, run_ids=[a, b])
    try:
        c = build_comparison(con, [a, b])
        return pair_deltas(c, a, b, con)
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--shift", type=float, default=0.10)
    args = ap.parse_args()
    totals = dict(tested=0, raw=0, raw_alarms=0, holm=0, regressions=0, alarms=0, p50=0, found=0, exit1=0)
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(tmp)
        for i in range(args.pairs):
            t0 = time.perf_counter()
            a, b, s = f"a{i}", f"b{i}", f"s{i}"
            write(store, a, 2 * i + 1, 1.0, args.requests)
            write(store, b, 2 * i + 2, 1.0, args.requests)
            write(store, s, 2 * i + 2, 1.0 + args.shift, args.requests)
            same = [r for r in entry(store, a, b)["rows"] if r["p_value"] is not None]
            raw_rows = [
                r
                for r in same
                if r["p_value"] < ALPHA
                and (r["delta_ci_low"] > 0 or r["delta_ci_high"] < 0)
                and (r["delta"] > 0) == (r["delta_ci_low"] > 0)
            ]
            raw = len(raw_rows)
            # what would have alarmed without the adjustment: a raw-real delta in the worse direction beyond 5 %
            raw_alarm = any(
                (r["delta"] > 0) == (r["better"] == "lower") and abs(r["pct"] or 0) >= FAIL_PCT for r in raw_rows
            )
            holm = sum(r["request_verdict"] in ("faster", "slower") for r in same)
            regressions = sum(request_regression(r) for r in same)
            shifted = entry(store, a, s)["rows"]
            p50 = [r for r in shifted if r["metric"].endswith("· p50_ttft_ms")]
            found = sum(r["request_verdict"] == "slower" for r in p50)
            exit1 = any(request_regression(r) for r in shifted)
            for k, v in dict(
                tested=len(same),
                raw=raw,
                raw_alarms=int(raw_alarm),
                holm=holm,
                regressions=regressions,
                alarms=int(regressions > 0),
                p50=len(p50),
                found=found,
                exit1=int(exit1),
            ).items():
                totals[k] += v
            print(
                f"pair {i}: same distribution: {len(same)} tested rows, {raw} real on their own test, {holm} real "
                f"after Holm, {regressions} regression(s); TTFT +{args.shift:.0%}: {found}/{len(p50)} p50 TTFT rows "
                f"slower, exit {1 if exit1 else 0}  ({time.perf_counter() - t0:.0f} s)"
            )
    t = totals
    print(
        f"\nover {args.pairs} pairs ({args.requests} requests per point, 20 points): same distribution — "
        f"{t['raw']} of {t['tested']} rows real on their own test ({t['raw'] / max(t['tested'], 1):.1%}; "
        f"{t['raw_alarms']} of {args.pairs} comparisons would exit 1 without the adjustment), "
        f"{t['holm']} after Holm, {t['alarms']} of {args.pairs} comparisons would exit 1 (fail threshold "
        f"{FAIL_PCT:g} %); TTFT +{args.shift:.0%} — {t['found']} of {t['p50']} p50 TTFT rows slower "
        f"({t['found'] / max(t['p50'], 1):.0%}), {t['exit1']} of {args.pairs} comparisons exit 1"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
