"""REPORT.md's Kernels (NKI) section: each kernel's verdict, then per shape set the simulator's and the device's
errors against the reference, the compile, and the kernel's latency against its torch reference with the speed-up;
every error verbatim with its class. Render stage: rows comparison.json holds (45_report_kernels.sql), nothing
computed; no section where there is no kernel row."""
from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table

INTRO = ("Each kernel against its reference on seeded generated inputs: the NKI simulator on the host, the device "
         "compile (neuronx-cc, with the first call), the device's output, and the timed calls of the kernel and of "
         "its torch reference on the device. A stage passes when every element is within max_abs + max_rel·|want|; "
         "latencies are p50 µs with their 95 % intervals (order statistics); speed-up = reference p50 / kernel p50, "
         "its interval at least 95 % (docs/reference/metrics.md, Kernels).")


def with_interval(x: Any, low: Any, high: Any) -> str:
    """``149.5 [139.0, 160.0]``; a side the sample cannot bound reads NULL."""
    return "NULL" if x is None else f"{fmt(x)} [{fmt(low)}, {fmt(high)}]"


def _cells(r: dict[str, Any], k: str) -> Any:
    if k == "kernel_p50":
        return with_interval(r.get("kernel_p50_us"), r.get("kernel_p50_low_us"), r.get("kernel_p50_high_us"))
    if k == "reference_p50":
        return with_interval(r.get("reference_p50_us"), r.get("reference_p50_low_us"), r.get("reference_p50_high_us"))
    if k == "speedup":
        return with_interval(r.get("speedup"), r.get("speedup_low"), r.get("speedup_high"))
    return r.get(k)


def s_kernels(c: Comparison) -> list[str]:
    k = c.kernels
    if k is None or not k.shapes:
        return []
    lines = ["## Kernels (NKI)", "", INTRO, ""]
    lines += table(k.kernels, [("run_id", "run"), ("kernel", "kernel"), ("shape_sets", "shape sets"),
                               ("passed", "pass"), ("simulated_only", "simulated only"), ("failed", "fail"),
                               ("errors", "error"), ("not_run", "not run"), ("verdict", "verdict")])
    lines += table(k.shapes, [("run_id", "run"), ("kernel", "kernel"), ("shape", "shape"), ("dtypes", "dtypes"),
                              ("simulate", "simulate"), ("simulate_max_abs_err", "max abs err"),
                              ("simulate_max_rel_err", "max rel err"), ("compile", "compile"),
                              ("compile_wall_s", "compile s"), ("device", "device"), ("kernel_p50", "kernel p50 µs"),
                              ("reference_op", "reference"), ("reference_p50", "reference p50 µs"),
                              ("speedup", "speed-up"), ("verdict", "verdict")], get=_cells)
    for r in k.shapes:
        if r.get("error") is not None:
            code = f", {r['error_code']}" if r.get("error_code") else ""
            lines.append(f"- **{fmt(r.get('kernel'))} {fmt(r.get('shape'))} · {fmt(r.get('error_stage'))} "
                         f"({fmt(r.get('error_class'))}{code})** (run `{r.get('run_id')}`): {fmt(r.get('error'))}")
    reasons: dict[str, list[str]] = {}
    for r in k.shapes:
        for key in ("not_run_reason", "timing_not_run_reason"):
            if r.get(key):
                reasons.setdefault(str(r[key]), []).append(f"{fmt(r.get('kernel'))} {fmt(r.get('shape'))}")
    for reason, where in reasons.items():
        lines.append(f"- Not run at {', '.join(dict.fromkeys(where))}: {fmt(reason)}")
    return lines + [""]
