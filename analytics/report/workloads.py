"""comparison.json ``workloads``: every workload point (its arrival, send lag, sessions, prefix-cache hit rate) and
its slices by input-length bucket, by turn and by session (the serving family's ``workload_*`` views)."""
from __future__ import annotations

from typing import Any

from analytics.report.rows import clean, rows

_ORDER = "run_id, lane, model, server_config, workload, repeat_index NULLS FIRST, max_concurrency NULLS FIRST"


def workloads_section(con: Any, present: set[str]) -> dict[str, Any]:
    """{"points", "buckets", "turns", "sessions"} (empty lists without the views or without workload points)."""
    if "workload_points" not in present:
        return {"points": [], "buckets": [], "turns": [], "sessions": []}
    points = rows(con, f"SELECT * EXCLUDE (workload_json) FROM workload_points ORDER BY {_ORDER}")
    keys = "SELECT run_id, lane, point_id, model, max_concurrency, request_rate, repeat_index FROM workload_points"
    buckets = rows(con, f"""SELECT b.*, p.model, p.max_concurrency, p.repeat_index FROM workload_length_buckets b
                            JOIN ({keys}) p USING (run_id, lane, point_id)
                            ORDER BY b.run_id, b.lane, b.server_config, b.workload, p.repeat_index NULLS FIRST,
                                     p.max_concurrency NULLS FIRST, b.bucket_lo""")
    turns = rows(con, f"""SELECT t.*, p.model, p.max_concurrency, p.repeat_index FROM workload_turns t
                          JOIN ({keys}) p USING (run_id, lane, point_id)
                          ORDER BY t.run_id, t.lane, t.server_config, t.workload, p.repeat_index NULLS FIRST,
                                   p.max_concurrency NULLS FIRST, t.turn_index""")
    sessions = rows(con, """SELECT run_id, lane, point_id, count(*) AS sessions, avg(turns_drawn) AS mean_turns_drawn,
                                   avg(turns_sent) AS mean_turns_sent, sum(turns_ok) AS turns_ok,
                                   sum(turns_sent) AS turns_sent, median(wall_s) AS p50_session_s
                            FROM workload_sessions WHERE session_id NOT LIKE 'w%'
                            GROUP BY ALL ORDER BY ALL""")
    return clean({"points": points, "buckets": buckets, "turns": turns, "sessions": sessions})
