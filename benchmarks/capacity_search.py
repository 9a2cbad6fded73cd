"""The capacity search against a batch-limited synthetic server whose capacity is known analytically, beside a
fixed ladder at the same precision run for real.

``neuronpipe synthetic-server --max-batch K`` decodes at most K requests at once; the rest queue FIFO and their
TTFT is counted from arrival (the client's clock), the way a batch-limited server behaves. A request holds its
slot for TTFT + (out − 1) × ITL, so the server completes at most K / (TTFT + (out − 1) × ITL) requests/s. The
SLO binds near capacity: its TTFT bound is loose enough that only the queue of an overload breaks it, and the
arrivals are near-regular (gamma shape ``--burstiness``) so queueing below capacity stays small.

For each (K, shape) setting, on a fresh server each:

* the search (``agents.loadgen.capacity.run_capacity_search``: the closed-loop probe for R0, the ×2 ladder,
  bisection to the precision, the saturation rules): its bracket against the truth, its points, its wall time;
* the fixed ladder: rates R0·(1 + precision)^k from the search's R0, each one point measured exactly as the
  search measures one (``measure_rate``: the same duration, grace, saturation rules and verdict), until a point
  fails: its points and measured wall time. It is given the search's R0, so it pays no probe of its own.

The goal: the search's wall time at most half the ladder's. Every time is measured, none estimated; the load
average is printed before and after (other work on the machine changes both). Run:
``python benchmarks/capacity_search.py [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (K, TTFT ms, ITL ms, input, output)
SETTINGS = [(2, 20.0, 10.0, 8, 4), (4, 20.0, 5.0, 16, 16), (8, 30.0, 4.0, 16, 32)]
GOAL = 0.5  # search time / ladder time
LADDER_MAX_POINTS = 60  # a ladder that never fails stops here (reported)


def truth(k: int, ttft_ms: float, itl_ms: float, out: int) -> float:
    return k / ((ttft_ms + (out - 1) * itl_ms) / 1000.0)


def fixed_ladder(template, spec, r0: float, tokenizer) -> dict:
    """Rates r0·(1+precision)^k, each measured as the search measures a point, until one fails."""
    from agents.loadgen.capacity import measure_rate, search_json

    base = dataclasses.replace(
        template,
        concurrency=None,
        request_rate=None,
        num_prompts=None,
        point_id=None,
        slo={"name": spec.slo_name, "ttft_ms": spec.ttft_ms, "tpot_ms": spec.tpot_ms, "percentile": spec.percentile},
    )
    t0 = time.monotonic()
    rate, last_pass, first_fail, n, reason = r0, None, None, 0, None
    while n < LADDER_MAX_POINTS:
        _, _, verdict = measure_rate(base, spec, rate, search_json(spec, "ladder", "ladder", n, r0), tokenizer)
        n += 1
        if not verdict.passed:
            first_fail, reason = rate, verdict.reason
            break
        last_pass, rate = rate, rate * (1 + spec.precision)
    return {"lo": last_pass, "hi": first_fail, "points": n, "wall_s": time.monotonic() - t0, "reason": reason}


def run_one(k: int, ttft: float, itl: float, inp: int, out: int, args: argparse.Namespace) -> dict:
    from agents.loadgen.capacity import run_capacity_search
    from agents.loadgen.point import SweepPoint
    from agents.loadgen.prompts import load_tokenizer
    from pipeline.capacity import CapacitySpec

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agents.loadgen.synthetic_server",
            "--port",
            "0",
            "--ttft-ms",
            str(ttft),
            "--itl-ms",
            str(itl),
            "--max-batch",
            str(k),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip().rsplit(" ", 1)[1]
    try:
        service_ms = ttft + (out - 1) * itl
        # TTFT bound: one service time of queueing; TPOT bound: ITL plus slack (decode is never slowed here)
        spec = CapacitySpec(
            ttft_ms=ttft + service_ms,
            tpot_ms=itl * 2 + 2,
            percentile=90.0,
            attainment=0.9,
            precision=args.precision,
            point_duration_s=args.point_duration,
            output_len=out,
        )
        template = SweepPoint(
            base_url=url,
            model="synthetic",
            input_len=inp,
            output_len=out,
            num_prompts=None,
            concurrency=1,
            server_kind="synthetic",
            burstiness=args.burstiness,
            warmup_requests=2,
        )
        tok = load_tokenizer(None, "synthetic")
        t0 = time.monotonic()
        res = run_capacity_search(template, spec, tok)
        search_s = time.monotonic() - t0
        ladder = fixed_ladder(template, spec, res.r0, tok)
        return {
            "K": k,
            "shape": f"{inp}:{out}",
            "truth": truth(k, ttft, itl, out),
            "r0": res.r0,
            "lo": res.max_rate_meeting_slo,
            "hi": res.lowest_rate_missing_slo,
            "points": len(res.points) + 1,
            "search_s": search_s,
            "ladder": ladder,
            "stop": res.stop_reason,
        }
    finally:
        proc.terminate()
        proc.wait(10)


def _rate(x: float | None) -> str:
    return "none" if x is None else f"{x:.2f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one tiny setting (development)")
    p.add_argument("--precision", type=float, default=0.1)
    p.add_argument("--point-duration", type=float, default=3.0)
    p.add_argument("--burstiness", type=float, default=50.0)
    args = p.parse_args()
    settings = SETTINGS[:1] if args.quick else SETTINGS
    out = sys.stdout
    out.write(f"load average at start: {os.getloadavg()[0]:.2f} (other work on the machine changes every time)\n")
    out.write(f"precision {args.precision:g}, {args.point_duration:g} s points; points include the search's probe\n")
    out.write(
        "| K | in:out | true capacity req/s | R0 | search bracket [pass, fail) | within precision below the "
        "truth, never above | ladder bracket [pass, fail) | points search / ladder | search s | ladder s "
        "(measured) | search / ladder | goal <= 0.5 |\n"
    )
    out.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    ok, notes = True, []
    for s in settings:
        r = run_one(*s, args)
        lad = r["ladder"]
        good = r["lo"] is not None and (1 - args.precision) * r["truth"] <= r["lo"] <= r["truth"]
        ratio = r["search_s"] / lad["wall_s"]
        ok &= good
        out.write(
            f"| {r['K']} | {r['shape']} | {r['truth']:.2f} | {r['r0']:.2f} | [{_rate(r['lo'])}, "
            f"{_rate(r['hi'])}) | {'yes' if good else 'NO'} | [{_rate(lad['lo'])}, {_rate(lad['hi'])}) | "
            f"{r['points']} / {lad['points']} | {r['search_s']:.1f} | {lad['wall_s']:.1f} | {ratio:.2f} | "
            f"{'met' if ratio <= GOAL else 'MISSED'} |\n"
        )
        out.flush()
        notes.append(
            f"K={r['K']} {r['shape']}: search: {r['stop']}; ladder's first failure "
            f"({_rate(lad['hi'])} req/s): {lad['reason'] or 'none'}"
        )
    out.write("\n".join(notes) + "\n")
    out.write(f"load average at end: {os.getloadavg()[0]:.2f}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
