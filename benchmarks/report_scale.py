"""How the views and the report build scale with the number of request rows.

For each size (10^4 … --max, default 10^6) it commits one synthetic run
(tests/support/synthetic.py) into a temporary local store, then times:

* ``connect``  — opening the views (table views over the committed files + every derived view),
* ``views``    — materialising the heavy derived views once each (serving_points,
                 sustained_summary, report_point_cost, report_exclusions),
* ``report``   — the whole ``build_report_files`` (comparison.json, REPORT.md, PNGs).

A size above ``--rows-per-run`` is committed as several runs (each lane attempt is
written in one piece, so one huge run needs its whole requests table in memory);
the report then shows them side by side. DuckDB runs under ``--memory-limit``.

    .venv/bin/python benchmarks/report_scale.py            # 10^4, 10^5, 10^6
    .venv/bin/python benchmarks/report_scale.py --max 1e7  # 10 runs of 10^6; minutes

Timings are wall seconds on whatever machine runs it (shared CPUs make them noisy);
the target is the report for 10^6 requests under 10 s, growing about linearly.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support.synthetic: the synthetic runs live with the tests

VIEWS = ("serving_points", "sustained_summary", "report_point_cost", "report_exclusions")
LANES = ("provenance", "host_cpu", "precompile", "sft", "serve_sweep", "sustained", "quality", "qwen3_attempt")


def open_views(store, duckdb_config: dict[str, str], views_sql: Path | None):
    """The views; with ``views_sql``, that file replaces its namesake in analytics/views/sql (an experiment)."""
    from analytics.views import VIEW_FILES, connect, derived_sql_files

    con = connect(store, **duckdb_config)
    if views_sql is not None:
        con.execute(views_sql.read_text())
        later = VIEW_FILES[VIEW_FILES.index(views_sql.name) + 1 :]
        for _, text in derived_sql_files(later):  # re-create the views that build on the replaced file
            con.execute(text)
    return con


def run_size(
    n_requests: int,
    root: Path,
    output_len: int,
    rows_per_run: int,
    duckdb_config: dict[str, str],
    views_sql: Path | None = None,
) -> dict[str, float]:
    from analytics.report import write_report
    from analytics.store import LocalStore
    from tests.support.synthetic import SyntheticRun, write_synthetic_run

    configs = ("tp2-bs8", "tp2-bs32")
    concs = (1, 2, 4, 8, 16, 32, 64, 128)
    runs = max(1, -(-n_requests // rows_per_run))
    per_point = max(1, n_requests // runs // (len(configs) * len(concs) + 4))  # the sustained point takes 4x
    store = LocalStore(root / "results")
    t = time.perf_counter()
    for i in range(runs):
        write_synthetic_run(
            store,
            SyntheticRun(
                run_id=f"scale-{n_requests}-{i:03d}",
                server_configs=configs,
                concurrencies=concs,
                requests_per_point=per_point,
                output_len=output_len,
                lanes=LANES,
                seed=i,
            ),
        )
    t_write = time.perf_counter() - t

    t = time.perf_counter()
    con = open_views(store, duckdb_config, views_sql)
    t_connect = time.perf_counter() - t
    rows = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    t = time.perf_counter()
    for view in VIEWS:
        con.execute(f"SELECT count(*) FROM (SELECT * FROM {view})").fetchone()
    t_views = time.perf_counter() - t
    con.close()

    t = time.perf_counter()  # what build_report_files does: open the views, write the report
    con = open_views(store, duckdb_config, views_sql)
    write_report(con, None, root / "report")
    con.close()
    t_report = time.perf_counter() - t
    return {
        "requests": rows,
        "runs": runs,
        "chunks": rows * output_len,
        "write_s": t_write,
        "connect_s": t_connect,
        "views_s": t_views,
        "report_s": t_report,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min", type=float, default=1e4, help="smallest size (requests)")
    parser.add_argument("--max", type=float, default=1e6, help="largest size (requests); 1e7 needs care")
    parser.add_argument("--output-len", type=int, default=16, help="tokens (chunks) per request")
    parser.add_argument("--rows-per-run", type=float, default=1e6, help="requests per synthetic run")
    parser.add_argument("--memory-limit", default="4GB", help="DuckDB memory_limit (it spills beyond)")
    parser.add_argument(
        "--views-sql",
        type=Path,
        default=None,
        help="experiment: a changed copy of one analytics/views/sql file, run in its place",
    )
    parser.add_argument("--keep", default=None, help="keep the synthetic results under this directory")
    args = parser.parse_args(argv)
    sizes, n = [], int(args.min)
    while n <= int(args.max):
        sizes.append(n)
        n *= 10
    header = (
        f"{'requests':>10} {'runs':>4} {'chunks':>11} {'write s':>8} {'connect s':>9} {'views s':>8} "
        f"{'report s':>9} {'report s / 1e6 req':>18} {'peak RSS MiB':>12}"
    )
    print(
        f"cpus: {os.cpu_count()}  (timings are wall seconds; shared machines are noisy)"
        + (f"; views from {args.views_sql}" if args.views_sql else "")
    )
    print(header)
    for size in sizes:
        root = Path(args.keep) / str(size) if args.keep else Path(tempfile.mkdtemp(prefix="report-scale-"))
        try:
            spill = root / "duckdb-spill"
            r = run_size(
                size,
                root,
                args.output_len,
                int(args.rows_per_run),
                {"memory_limit": args.memory_limit, "temp_directory": str(spill)},
                args.views_sql,
            )
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        print(
            f"{r['requests']:>10,} {r['runs']:>4} {r['chunks']:>11,} {r['write_s']:>8.2f} {r['connect_s']:>9.2f} "
            f"{r['views_s']:>8.2f} {r['report_s']:>9.2f} {r['report_s'] / r['requests'] * 1e6:>18.2f} "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:>12,.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
