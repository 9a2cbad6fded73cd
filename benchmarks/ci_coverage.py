"""Empirical coverage of the views' 95 % quantile intervals, on samples from a known distribution.

For each n (default 32, 128, 1000) it draws --reps independent samples of n TTFTs from a lognormal,
makes each sample one sweep point of a ``requests`` table, reads ``serving_points`` (the same SQL the
pipeline uses: analytics/views/sql/1*_serving_*.sql, through agents.loadgen.metrics.connect_rows) and
counts how often the interval holds the true quantile exp(mu + sigma·z_p):

* ``both``: among points where both bounds exist, the share with low ≤ q ≤ high (target ≥ 0.95);
* ``low ok`` / ``high ok``: per side, among points where that bound exists, the share on the right side of
  q (target ≥ 0.975 each);
* ``defined``: the share of points where the bound exists at all (NULL when the rank falls outside 1..n).

    .venv/bin/python benchmarks/ci_coverage.py                 # 400 reps per n
    .venv/bin/python benchmarks/ci_coverage.py --reps 2000     # tighter figures (± ~0.5 %), slower

A figure for a report (Monte Carlo, seeded), never a test.
"""

from __future__ import annotations

import argparse
import math
from statistics import NormalDist

import numpy as np
import pyarrow as pa

S = 1_000_000_000
QS = (0.5, 0.9, 0.99)


def requests_table(ns: tuple[int, ...], reps: int, mu: float, sigma: float, seed: int) -> tuple[pa.Table, list[dict]]:
    from analytics.schema import conform

    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {
        k: []
        for k in (
            "point_id",
            "request_id",
            "request_index",
            "t_scheduled_ns",
            "t_sent_ns",
            "t_done_ns",
            "ttft_s",
            "e2el_s",
            "chunk_times_s",
            "chunk_tokens",
            "prompt_tokens",
            "output_tokens",
            "success",
        )
    }
    points = []
    for n in ns:
        for r in range(reps):
            pid = f"n{n}-{r}"
            points.append({"point_id": pid})
            ttft = rng.lognormal(mu, sigma, n)
            sent = np.arange(n, dtype=np.int64) * (S // 10)
            cols["point_id"] += [pid] * n
            cols["request_id"] += [f"{pid}-{i}" for i in range(n)]
            cols["request_index"] += list(range(n))
            cols["t_scheduled_ns"] += sent.tolist()
            cols["t_sent_ns"] += sent.tolist()
            cols["t_done_ns"] += (sent + (ttft * S).astype(np.int64)).tolist()
            cols["ttft_s"] += ttft.tolist()
            cols["e2el_s"] += ttft.tolist()
            cols["chunk_times_s"] += [[t] for t in ttft.tolist()]
            cols["chunk_tokens"] += [[1]] * n
            cols["prompt_tokens"] += [8] * n
            cols["output_tokens"] += [1] * n
            cols["success"] += [True] * n
    defaults = {"run_id": "local", "lane": "loadgen", "attempt": "local", "warmup": False}  # connect_rows' keys
    return conform("requests", pa.table(cols), defaults=defaults), points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[32, 128, 1000])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--mu", type=float, default=math.log(0.2), help="lognormal mu of TTFT in seconds")
    ap.add_argument("--sigma", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    from agents.loadgen.metrics import connect_rows

    requests, points = requests_table(tuple(a.n), a.reps, a.mu, a.sigma, a.seed)
    con = connect_rows({"requests": requests, "sweep_points": points})
    cols = ", ".join(f"p{round(p * 100)}_ttft_ms_ci_low, p{round(p * 100)}_ttft_ms_ci_high" for p in QS)
    got = con.execute(f"SELECT completed, {cols} FROM serving_points").fetchall()
    print(
        f"TTFT ~ lognormal(mu={a.mu:.3f}, sigma={a.sigma}) s; {a.reps} samples per n; 95 % order-statistic "
        "interval from serving_points"
    )
    print(f"{'n':>6} {'p':>5} {'both':>7} {'low ok':>7} {'high ok':>8} {'low def':>8} {'high def':>9}")
    for n in a.n:
        rows = [r for r in got if r[0] == n]
        for j, p in enumerate(QS):
            q = math.exp(a.mu + a.sigma * NormalDist().inv_cdf(p)) * 1000.0
            lows = [r[1 + 2 * j] for r in rows]
            highs = [r[2 + 2 * j] for r in rows]
            both = [(lo, hi) for lo, hi in zip(lows, highs) if lo is not None and hi is not None]
            lo_def = [lo for lo in lows if lo is not None]
            hi_def = [hi for hi in highs if hi is not None]

            def share(xs: list, ok) -> str:
                return f"{sum(map(ok, xs)) / len(xs):.3f}" if xs else "—"

            print(
                f"{n:>6} {p:>5} {share(both, lambda b, q=q: b[0] <= q <= b[1]):>7} "
                f"{share(lo_def, lambda x, q=q: x <= q):>7} {share(hi_def, lambda x, q=q: x >= q):>8} "
                f"{len(lo_def) / len(rows):>8.2f} {len(hi_def) / len(rows):>9.2f}"
            )


if __name__ == "__main__":
    main()
