"""The capacity search against a batch-limited synthetic server whose capacity is known analytically, under tight
and loose SLOs, short and long outputs (and, with ``--ladder``, beside a fixed ladder at the same precision).

``neuronpipe synthetic-server --max-batch K`` decodes at most K requests at once; the rest queue FIFO and their
TTFT is counted from arrival (the client's clock), the way a batch-limited server behaves. A request holds its
slot for TTFT + (out − 1) × ITL, so the server completes at most K / (TTFT + (out − 1) × ITL) requests/s. The
SLO's TTFT bound is the server's TTFT plus 1 service time (tight: the queue of an overload breaks it) or 6 (loose:
a short overloaded point ends before its queue reaches the bound, and only the search's overload test and its
confirmation point can tell); arrivals are near-regular (gamma shape ``--burstiness``) so queueing below capacity
stays small. The times are a few times a real decode step's (ITL 10–30 ms) so that a 2-core machine shared with
other work keeps the server's schedule (at 4 ms steps its true capacity fell with the load).

For each setting, on a fresh server each:

* the search (``agents.loadgen.capacity.run_capacity_search``: the closed-loop probe for R0, the ×2 ladder,
  bisection to the precision, the saturation and overload rules, the confirmation at the answer): its bracket
  against the truth (the claim: within 10 % below, never above), its points, the confirmation's seconds, its
  wall time;
* with ``--ladder``, the fixed ladder: rates R0·(1 + precision)^k from the search's R0, each one point measured
  exactly as the search measures one (``measure_rate``), until a point fails: its points and measured wall time.

Every time is measured, none estimated; the load average is printed before and after (other work on the machine
changes both); each setting's rejected rates and why follow the table. Exit 1 when a setting misses the claim.
Run: ``python benchmarks/capacity_search.py [--quick] [--only N ...] [--ladder]``.
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

# (K, TTFT ms, ITL ms, input, output, TTFT bound in service times beyond the server's TTFT): tight (1) and loose
# (6) SLOs, short and long outputs
SETTINGS = [
    (2, 60.0, 30.0, 8, 4, 1),
    (2, 60.0, 30.0, 8, 4, 6),
    (4, 60.0, 15.0, 16, 16, 1),
    (4, 60.0, 15.0, 16, 16, 6),
    (8, 90.0, 12.0, 16, 32, 1),
    (8, 90.0, 12.0, 16, 32, 6),
    (8, 60.0, 10.0, 16, 128, 1),
    (8, 60.0, 10.0, 16, 128, 6),
]
# a point lasts at least this many service times (long outputs: the point covers the same number of them)
POINT_SERVICE_TIMES = 10
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


def run_one(k: int, ttft: float, itl: float, inp: int, out: int, loose: int, args: argparse.Namespace) -> dict:
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
        # TTFT bound: `loose` service times of queueing; TPOT bound: ITL plus slack (decode is never slowed here)
        extra = {"confirm_overload": args.confirm_overload} if "confirm_overload" in CapacitySpec.model_fields else {}
        spec = CapacitySpec(
            ttft_ms=ttft + loose * service_ms,
            tpot_ms=itl * 2 + 2,
            percentile=90.0,
            attainment=0.9,
            precision=args.precision,
            point_duration_s=max(args.point_duration, POINT_SERVICE_TIMES * service_ms / 1000.0),
            output_len=out,
            **extra,
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
        ladder = fixed_ladder(template, spec, res.r0, tok) if args.ladder else None
        return {
            "K": k,
            "shape": f"{inp}:{out}",
            "ttft_bound_ms": spec.ttft_ms,
            "service_ms": service_ms,
            "point_s": spec.point_duration_s,
            "truth": truth(k, ttft, itl, out),
            "r0": res.r0,
            "lo": res.max_rate_meeting_slo,
            "hi": res.lowest_rate_missing_slo,
            "points": len(res.points) + 1,
            "confirm_s": sum(p.get("duration_s") or 0.0 for p in res.points if p.get("phase") == "confirm"),
            "search_s": search_s,
            "ladder": ladder,
            "stop": res.stop_reason,
            "rejected": [
                f"{p['rate']:.4g} ({p['phase']}): {p['reason']}" for p in res.points if not p["passed"] and p["reason"]
            ],
        }
    finally:
        proc.terminate()
        proc.wait(10)


def _rate(x: float | None) -> str:
    return "none" if x is None else f"{x:.2f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the first two settings (development)")
    p.add_argument("--only", type=int, nargs="*", help="these settings (1-based indices of SETTINGS)")
    p.add_argument("--precision", type=float, default=0.1)
    p.add_argument("--point-duration", type=float, default=3.0, help="at least; long outputs get 10 service times")
    p.add_argument("--burstiness", type=float, default=50.0)
    p.add_argument("--confirm-overload", type=float, default=0.05, help="the search's confirm_overload")
    p.add_argument("--ladder", action="store_true", help="also run the fixed ladder at each setting (its time)")
    args = p.parse_args()
    settings = [SETTINGS[i - 1] for i in args.only] if args.only else SETTINGS[:2] if args.quick else SETTINGS
    out = sys.stdout
    out.write(f"load average at start: {os.getloadavg()[0]:.2f} (other work on the machine changes every time)\n")
    out.write(f"precision {args.precision:g}; points include the search's probe and any confirmation\n")
    cols = [
        "K",
        "in:out",
        "service ms",
        "TTFT bound ms (service times)",
        "point s",
        "true capacity req/s",
        "search bracket [pass, fail)",
        "answer / truth",
        "within 10 % below, never above",
        "points",
        "confirmation s",
        "search s",
    ]
    if args.ladder:
        cols += ["ladder bracket [pass, fail)", "ladder points", "ladder s", "search / ladder"]
    out.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
    ok, notes = True, []
    for s in settings:
        r = run_one(*s, args)
        good = r["lo"] is not None and 0.9 * r["truth"] <= r["lo"] <= r["truth"]
        ok &= good
        ratio = "none" if r["lo"] is None else f"{r['lo'] / r['truth']:.3f}"
        loose = (r["ttft_bound_ms"] - s[1]) / r["service_ms"]
        cells = [
            r["K"],
            r["shape"],
            f"{r['service_ms']:.0f}",
            f"{r['ttft_bound_ms']:.0f} ({loose:.0f})",
            f"{r['point_s']:.1f}",
            f"{r['truth']:.2f}",
            f"[{_rate(r['lo'])}, {_rate(r['hi'])})",
            ratio,
            "yes" if good else "NO",
            r["points"],
            f"{r['confirm_s']:.1f}",
            f"{r['search_s']:.1f}",
        ]
        lad = r["ladder"]
        if lad is not None:
            cells += [
                f"[{_rate(lad['lo'])}, {_rate(lad['hi'])})",
                lad["points"],
                f"{lad['wall_s']:.1f}",
                f"{r['search_s'] / lad['wall_s']:.2f}",
            ]
        out.write("| " + " | ".join(str(c) for c in cells) + " |\n")
        out.flush()
        notes.append(f"K={r['K']} {r['shape']} bound {loose:.0f}: search: {r['stop']}")
        notes += [f"    rejected {x}" for x in r["rejected"]]
        sys.stderr.write("\n".join(notes[-1 - len(r["rejected"]) :]) + "\n")
    out.write("\n".join(notes) + "\n")
    out.write(f"load average at end: {os.getloadavg()[0]:.2f}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
