"""How much the confidence intervals cost serving_points: the view timed before and after, same data.

Builds points shaped like the full profile (default 4 points × 1,000 requests × 256 output tokens, one
token per chunk, so ~255 ITL gaps a request) in memory, loads them as the ``requests``/``sweep_points``
tables (agents.loadgen.metrics.connect_rows), and times ``CREATE TABLE … AS SELECT * FROM serving_points``
(best of --repeats) with this tree's serving views (analytics/views/sql/1*_serving_*.sql) and with those at
--baseline (a git revision; before the split, its one 10_serving.sql).

    .venv/bin/python benchmarks/ci_view_timing.py                  # this tree only
    .venv/bin/python benchmarks/ci_view_timing.py --baseline b691f53

Wall seconds on a shared machine: a figure for a report, never a test.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
SQL_DIR = "analytics/views/sql"
S = 1_000_000_000


def requests_table(points: int, n: int, tokens: int, seed: int) -> pa.Table:
    from analytics.schema import conform

    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {
        k: []
        for k in (
            "run_id",
            "lane",
            "attempt",
            "point_id",
            "request_id",
            "request_index",
            "warmup",
            "t_scheduled_ns",
            "t_sent_ns",
            "t_done_ns",
            "client_queue_s",
            "ttft_s",
            "e2el_s",
            "chunk_times_s",
            "chunk_tokens",
            "prompt_tokens",
            "output_tokens",
            "input_len",
            "output_len",
            "success",
        )
    }
    for p in range(points):
        sent = np.cumsum(rng.exponential(0.05, n))
        ttft = rng.lognormal(np.log(0.2), 0.5, n)
        for i in range(n):
            gaps = rng.lognormal(np.log(0.02), 0.3, tokens - 1)
            chunks = np.concatenate([[ttft[i]], ttft[i] + np.cumsum(gaps)])
            t0 = int(sent[i] * S)
            for k, v in (
                ("run_id", "r"),
                ("lane", "serve_sweep"),
                ("attempt", "a"),
                ("point_id", f"p{p}"),
                ("request_id", f"p{p}-{i}"),
                ("request_index", i),
                ("warmup", False),
                ("t_scheduled_ns", t0),
                ("t_sent_ns", t0),
                ("t_done_ns", t0 + int(chunks[-1] * S)),
                ("client_queue_s", 0.0),
                ("ttft_s", float(ttft[i])),
                ("e2el_s", float(chunks[-1])),
                ("chunk_times_s", chunks.tolist()),
                ("chunk_tokens", [1] * tokens),
                ("prompt_tokens", 128),
                ("output_tokens", tokens),
                ("input_len", 128),
                ("output_len", tokens),
                ("success", True),
            ):
                cols[k].append(v)
    return conform("requests", pa.table(cols))


def time_view(sql_text: str, tables: dict, repeats: int) -> float:
    import duckdb

    from analytics.schema import conform

    best = float("inf")
    for _ in range(repeats):
        con = duckdb.connect(":memory:")
        con.register("__req", tables["requests"])
        con.execute("CREATE TABLE requests AS SELECT * FROM __req")
        con.register(
            "__sp",
            conform(
                "sweep_points", tables["sweep_points"], defaults={"run_id": "r", "lane": "serve_sweep", "attempt": "a"}
            ),
        )
        con.execute("CREATE TABLE sweep_points AS SELECT * FROM __sp")
        con.execute(sql_text)
        t = time.perf_counter()
        con.execute("CREATE TABLE out AS SELECT * FROM serving_points")
        best = min(best, time.perf_counter() - t)
        con.close()
    return best


def serving_sql_at(revision: str) -> str:
    """The serving views' SQL at a git revision: its one 10_serving.sql, or the family's files in their order."""
    from analytics.views import SERVING_FILES

    def show(name: str, check: bool) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "show", f"{revision}:{SQL_DIR}/{name}"], cwd=ROOT, check=check, capture_output=True, text=True
        )

    single = show("10_serving.sql", check=False)
    if single.returncode == 0:
        return single.stdout
    return "\n".join(show(name, check=True).stdout for name in SERVING_FILES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", default=None, help="git revision whose serving views are the 'before'")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    tables = {
        "requests": requests_table(a.points, a.requests, a.tokens, a.seed),
        "sweep_points": [
            {"point_id": f"p{p}", "max_concurrency": 16, "slo_json": '{"ttft_ms": 300}'} for p in range(a.points)
        ],
    }
    print(
        f"{a.points} points × {a.requests} requests × {a.tokens} tokens "
        f"({tables['requests'].num_rows} request rows, ~{a.points * a.requests * (a.tokens - 1):,} ITL gaps)"
    )
    if a.baseline:
        print(f"before ({a.baseline}): {time_view(serving_sql_at(a.baseline), tables, a.repeats):.3f} s")
    from agents.loadgen.metrics import serving_sql

    print(f"after (this tree):  {time_view(serving_sql(), tables, a.repeats):.3f} s")


if __name__ == "__main__":
    main()
