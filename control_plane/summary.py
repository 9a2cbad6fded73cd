"""The headline numbers of one run, read from the views (never recomputed here), as tables for a terminal.

Printed at the end of `neuronpipe run --local`; each section says plainly when its lanes left no rows. Lanes
that did not run because a lane they need failed are listed as skipped with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

# The last view file this summary reads (report_exclusions); a run's closing summary creates no view after it
# (tests/functional/test_run_summary.py checks it prints the same tables as with every view).
SUMMARY_VIEWS_THROUGH = "34_report_exclusions.sql"

# (title, SQL over the views with ? = run id). Serving probes of the Qwen3 attempt are outcomes, not points.
SECTIONS: tuple[tuple[str, str], ...] = (
    # Each lane's standing as pipeline.graph.statuses_from_rows decides it: the newest attempt that ran, or a
    # newer record of the lane being blocked (a need failed: skipped, with the reason and the lane to blame).
    (
        "Lanes",
        """
        select lane, status, round(wall_s, 1) as wall_s,
               coalesce(error_type || ': ' || error_message, skip_reason) as note
        from lane_runs where run_id = ? and (supersedes or blocked_by is not null)
        qualify row_number() over (partition by lane order by attempt desc) = 1
        order by started_at, lane""",
    ),
    (
        "Host CPU (context)",
        """
        select bench, threads, round(value, 2) as best, unit from host_bench where run_id = ?
        order by bench, threads""",
    ),
    (
        "Compile / boot",
        """
        select lane, what, model, config, n_cold, round(cold_wall_s, 2) as cold_s, n_warm,
               round(warm_wall_s, 2) as warm_s,
               n_uncached, round(uncached_wall_s, 2) as uncached_s, n_failed
        from report_compile where run_id = ? order by lane, model, config""",
    ),
    (
        "Training",
        """
        select lane, model, steps, round(first_loss, 3) as first_loss, round(last_loss, 3) as last_loss,
               round(tokens_per_s, 1) as tokens_per_s, params_trainable, params_frozen,
               coalesce(cast(round(mfu, 4) as varchar), 'NULL: ' || mfu_null_reason) as mfu
        from report_training where run_id = ? order by lane, model""",
    ),
    (
        "Serving (headline points)",
        """
        select s.lane, s.model, s.server_config as cfg, s.input_len || ':' || s.output_len as shape,
               s.max_concurrency as conc, s.completed, s.failed, round(s.median_ttft_ms, 1) as med_ttft_ms,
               round(s.p99_ttft_ms, 1) as p99_ttft_ms, round(s.median_tpot_ms, 2) as med_tpot_ms,
               round(s.output_throughput, 1) as out_tok_s
        from serving_points s join report_point_telemetry t using (run_id, lane, point_id)
        -- rule 7 as the report applies it: no telemetry in the window, or flagged invalid -> not a headline
        where s.run_id = ? and t.telemetry_samples > 0 and s.valid is not false
          and s.point_id not like 'qwen3-probe%' and s.point_id <> 'smoke-serve'
          and s.point_id not in (select point_id from sustained_summary where run_id = ?)
        order by s.lane, s.model, cfg, shape, conc""",
    ),
    (
        "Sustained",
        """
        select lane, point_id, windows, round(retention_vs_first, 3) as retention_vs_first,
               round(retention_vs_peak, 3) as retention_vs_peak,
               round(throughput_slope_per_min, 2) as tok_s_slope_per_min
        from sustained_summary where run_id = ?""",
    ),
    (
        "Weights round trip",
        """
        select model, artifacts, verified, mismatched, verdict from report_roundtrip where run_id = ? order by model""",
    ),
    (
        "Exclusions",
        """
        select lane, kind, subject, reason from report_exclusions where run_id = ? order by lane, kind, subject""",
    ),
)


@dataclass
class SummaryTable:
    title: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    error: str | None = None


def summarize(con: duckdb.DuckDBPyConnection, run_id: str) -> list[SummaryTable]:
    out = []
    for title, sql in SECTIONS:
        try:
            cur = con.execute(sql, [run_id] * sql.count("?"))
            out.append(SummaryTable(title, [d[0] for d in cur.description], cur.fetchall()))
        except duckdb.Error as exc:  # a view missing from an older layout: say so, keep the rest
            out.append(SummaryTable(title, [], [], error=f"{type(exc).__name__}: {exc}"))
    return out


def render(tables: list[SummaryTable], console: Any) -> None:
    from rich.table import Table

    for t in tables:
        if t.error:
            console.print(f"[bold]{t.title}[/bold]: unavailable ({t.error})")
            continue
        if not t.rows:
            console.print(f"[bold]{t.title}[/bold]: no results in this run")
            continue
        table = Table(title=t.title, title_justify="left")
        for c in t.columns:
            table.add_column(c, overflow="fold")
        for row in t.rows:
            table.add_row(*["NULL" if v is None else str(v) for v in row])
        console.print(table)
