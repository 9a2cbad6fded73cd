"""REPORT.md's "Workloads": each workload point, then its requests by input-length bucket and by turn
(comparison.json ``workloads``, built by :mod:`analytics.report.workloads`)."""
from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import table


def _pct(x: Any) -> Any:
    return None if x is None else f"{100 * x:.1f} %"


def s_workloads(c: Comparison) -> list[str]:
    w = c.workloads
    points = w.points
    if not points:
        return []
    lines = ["## Workloads", "",
             "Points measured on a production-shaped workload (docs/reference/workloads.md): drawn lengths, a prompt "
             "source, shared prefixes, multi-turn sessions, a trace or a ramp. `in`/`out` are the spec's nominal "
             "lengths (each request's drawn target is in `requests.input_len`); the send lag is t_sent - t_scheduled "
             "(for a trace or a ramp, how late the client kept the schedule; gated like the closed loop's lag); the "
             "prefix-cache hit rate is the server's own counters over the measured requests.", ""]
    sessions = {(s["run_id"], s["lane"], s["point_id"]): s for s in w.sessions}

    def turns_text(p: dict[str, Any]) -> str | None:
        s = sessions.get((p["run_id"], p["lane"], p["point_id"]))
        return None if s is None else (
            f"{s['sessions']} × {s['mean_turns_sent']:.1f} of {s['mean_turns_drawn']:.1f} turns "
            f"({s['turns_ok']}/{s['turns_sent']} ok)")

    # copies: the document's rows are read again after this (the plots, REPORT.html) and must stay as written
    points = [{**p, "turns_text": turns_text(p)} for p in points]
    cols = [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("server_config", "config"),
            ("workload", "workload"), ("arrival", "arrival"), ("nominal_input_len", "in"),
            ("nominal_output_len", "out"), ("max_concurrency", "conc"), ("request_rate", "rate"),
            ("requests", "requests"), ("failed", "failed"), ("p99_send_lag_ms", "p99 send lag ms"),
            ("send_lag_ok", "lag ok"), ("achieved_rate", "achieved /s"), ("scheduled_rate", "scheduled /s"),
            ("turns_text", "sessions"), ("prefix_cache_hit_rate", "prefix hit"), ("prefix_cache_note", "note")]

    def cell(r: dict[str, Any], k: str) -> Any:
        if k == "prefix_cache_hit_rate":
            return _pct(r.get(k))
        if k in ("achieved_rate", "scheduled_rate") and r.get("mode") == "closed":
            return None if k == "scheduled_rate" else r.get(k)
        return r.get(k)

    lines += table(points, cols, cell)
    buckets = w.buckets
    if buckets:
        lines += ["### By input length", "",
                  "Requests by the power-of-two bucket of their drawn input length.", ""]
        lines += table(buckets, [("run_id", "run"), ("lane", "lane"), ("server_config", "config"),
                                 ("workload", "workload"), ("max_concurrency", "conc"), ("repeat_index", "repeat"),
                                 ("bucket", "input tokens"), ("requests", "requests"), ("completed", "ok"),
                                 ("p50_ttft_ms", "p50 TTFT ms"), ("p99_ttft_ms", "p99 TTFT ms"),
                                 ("p50_tpot_ms", "p50 TPOT ms"), ("p50_e2el_ms", "p50 E2EL ms")],
                       lambda r, k: f"[{r['bucket_lo']}, {r['bucket_hi']})" if k == "bucket" else r.get(k))
    turns = w.turns
    if turns:
        lines += ["### By turn", "",
                  "A session's turn k is the conversation so far (every earlier message and reply, through the chat "
                  "template) plus a new message: its input grows, and so does its TTFT.", ""]
        lines += table(turns, [("run_id", "run"), ("lane", "lane"), ("server_config", "config"),
                               ("workload", "workload"), ("max_concurrency", "conc"), ("repeat_index", "repeat"),
                               ("turn", "turn"), ("requests", "requests"), ("completed", "ok"),
                               ("mean_input_len", "mean input tokens"), ("p50_ttft_ms", "p50 TTFT ms"),
                               ("p99_ttft_ms", "p99 TTFT ms"), ("p50_tpot_ms", "p50 TPOT ms")],
                       lambda r, k: r["turn_index"] + 1 if k == "turn" else r.get(k))
    return lines
