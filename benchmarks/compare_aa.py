"""How often `neuronpipe compare` calls run-to-run noise real on real runs of this machine, and whether it still
finds a real 10 % slowdown (a benchmark, not a test).

Every run is one serve_sweep lane on the CPU server (tiny model, config A, one shape, concurrency 1 and 2, every
point measured REPEATS times: sweep_repeats). First CALIBRATION A/A runs go into the store; then per pair i, back
to back: A_i, B_i (the same request as A_i) and S_i (the same with every forward pass of the CPU server SLOWDOWN
slower: $NEURONPIPE_CPU_SERVER_SLOWDOWN). Each pair is judged with the noise floor measured from the A/A runs the
store held before it (the calibration runs and the earlier pairs' A and B: `--floor-from`).

  before  the per-request rule (Mann–Whitney / Welch over requests and batches, Holm): ``request_verdict``
  after   the run-level rule (Welch on log per-repeat values, Holm, the noise floor): ``verdict``, exit code

Then the same runs as sides of SIDES runs each (a_0..a_4 v b_0..b_4, a v s; the unit is the run, the floor from
the calibration runs). Printed per comparison and in total: A v B — tested rows and false verdicts per metric
family, before and after; A v S — rows called slower (power), exit codes.

    .venv/bin/python benchmarks/compare_aa.py [--pairs 10] [--repeats 3] [--prompts 40] [--slowdown 0.1]
                                              [--calibration 3] [--sides 5] [--results DIR] [--analyse]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.serving.cpu_server import SLOWDOWN_ENV  # noqa: E402 - after the repository root is put on sys.path
from analytics.report.sides import compare_sides  # noqa: E402 - after the repository root is put on sys.path
from analytics.store import open_store  # noqa: E402 - after the repository root is put on sys.path

REAL = ("faster", "slower")


def request(repeats: int, prompts: int) -> dict:
    return {
        "profile": "tiny",
        "lanes": ["serve_sweep"],
        "lane_config": {
            "serve_sweep": {
                "server_configs": ["A"],
                "shapes": {"A": ["16:8"]},
                "min_prompts": prompts,
                "prompts_per_stream": 1,
                "warmup_requests": 2,
                "max_concurrency": 2,
                "sweep_repeats": repeats,
                "repeat_order": "interleaved",
            }
        },
    }


def run(results: str, run_id: str, req_file: str, slowdown: float | None = None, extra: tuple[str, ...] = ()) -> float:
    """One ``run --local`` of ``req_file`` into ``results`` as ``run_id`` (``slowdown``: the CPU server's injected
    factor; ``extra``: more CLI arguments), its wall seconds; a failed run ends the benchmark with its output."""
    t0 = time.perf_counter()
    env = {**os.environ, **({SLOWDOWN_ENV: str(slowdown)} if slowdown is not None else {})}
    cmd = [
        sys.executable,
        "-m",
        "control_plane.cli",
        "run",
        "--local",
        "--input",
        req_file,
        "--results",
        results,
        "--run-id",
        run_id,
        "--no-live",
        *extra,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run {run_id} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def tally(entry: dict, key: str, counts: Counter, tested: Counter, counted: tuple[str, ...] = REAL) -> None:
    """Per metric family of the serving rows: rows with a test (``tested``) and rows whose ``key`` is in
    ``counted`` (A/A: any real verdict is false; the slowdown: only ``slower`` is found)."""
    for r in entry["rows"]:
        if not r["metric"].startswith("serving · "):
            continue
        fam = r["metric"].rsplit(" · ", 1)[-1]
        if key == "request_verdict" and r.get("p_adjusted") is None:
            continue
        if key == "verdict" and r["verdict"] == "untested":
            continue
        tested[fam] += 1
        counts[fam] += r[key] in counted


def judge_pair(store, a: list[str], b: list[str], s: list[str], floor_runs: list[str], t: dict) -> str:
    """Compare A/A (a v b) and the slowdown (a v s); add to the totals ``t``; one line of what happened."""
    same = compare_sides(store, a, b, floor_runs)
    slow = compare_sides(store, a, s, floor_runs)
    pb, pt, qa, qt = Counter(), Counter(), Counter(), Counter()
    tally(same, "request_verdict", pb, pt)
    tally(same, "verdict", qa, qt)
    xs, ys, xt = Counter(), Counter(), Counter()
    tally(slow, "request_verdict", xs, Counter(), ("slower",))
    tally(slow, "verdict", ys, xt, ("slower",))
    for k, c in (("fb", pb), ("tb", pt), ("fa", qa), ("ta", qt), ("sb", xs), ("sa", ys), ("st", xt)):
        t[k].update(c)
    t["aa_exit_before"] += any(r["request_verdict"] == "slower" and abs(r["pct"] or 0) >= 5 for r in same["rows"])
    t["aa_exit_after"] += any(r["regression"] for r in same["rows"])
    t["s_any"] += sum(ys.values()) > 0 and not any(r["verdict"] == "faster" for r in slow["rows"])
    t["s_exit"] += any(r["regression"] for r in slow["rows"])
    t["n"] += 1
    floor = {r["metric"].rsplit(" · ", 1)[-1]: r["floor_pct"] for r in same["rows"]}
    return (
        f"A/A {sum(pt.values())} rows tested per request, {sum(pb.values())} real; {sum(qt.values())} judged, "
        f"{sum(qa.values())} real after; slowdown {sum(ys.values())} of {sum(xt.values())} rows slower "
        f"({sum(xs.values())} per request); floor p50 TPOT {floor.get('p50_tpot_ms') or 0:.1f} %, "
        f"p50 E2EL {floor.get('p50_e2el_ms') or 0:.1f} %"
    )


def totals() -> dict:
    return {k: Counter() for k in ("fb", "tb", "fa", "ta", "sb", "sa", "st")} | {
        k: 0 for k in ("aa_exit_before", "aa_exit_after", "s_any", "s_exit", "n")
    }


def print_table(title: str, t: dict) -> None:
    tot = lambda c: sum(c.values())  # noqa: E731 - a one-line total
    print(f"\n{title}")
    print(
        f"{'family':<18} {'before: false/tested':>22} {'after: false/judged':>20} {'slowdown: slower after':>24}"
        f" {'(before)':>9}"
    )
    for f in sorted(set(t["tb"]) | set(t["ta"])):
        print(
            f"{f:<18} {t['fb'][f]:>10}/{t['tb'][f]:<11} {t['fa'][f]:>9}/{t['ta'][f]:<10} "
            f"{t['sa'][f]:>12}/{t['st'][f]:<11} {t['sb'][f]:>9}"
        )
    print(
        f"{'all':<18} {tot(t['fb']):>10}/{tot(t['tb']):<11} {tot(t['fa']):>9}/{tot(t['ta']):<10} "
        f"{tot(t['sa']):>12}/{tot(t['st']):<11} {tot(t['sb']):>9}"
    )
    print(
        f"A/A comparisons that would exit 1: before {t['aa_exit_before']}, after {t['aa_exit_after']} of {t['n']}; "
        f"slowdown comparisons with a 'slower' row (none 'faster'): {t['s_any']}, exiting 1: {t['s_exit']} of "
        f"{t['n']}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=40, help="measured requests per point and repeat")
    ap.add_argument("--slowdown", type=float, default=0.10)
    ap.add_argument("--calibration", type=int, default=3, help="A/A runs before the first pair (the first floor)")
    ap.add_argument("--sides", type=int, default=5, help="then compare sides of this many runs (a v b, a v s)")
    ap.add_argument("--results", default=None, help="results root (default: a temporary directory)")
    ap.add_argument("--analyse", action="store_true", help="run nothing: judge the runs already in --results")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = args.results or str(Path(tmp) / "results")
        req_file = str(Path(tmp) / "request.json")
        Path(req_file).write_text(json.dumps(request(args.repeats, args.prompts)))
        store = open_store(results)
        cal = [f"cal{i}" for i in range(args.calibration)]
        if not args.analyse:
            for run_id in cal:
                run(results, run_id, req_file, 0.0)
        t = totals()
        for i in range(args.pairs):
            t0 = time.perf_counter()
            a, b, s = f"a{i}", f"b{i}", f"s{i}"
            if not args.analyse:
                for run_id, slowdown in ((a, 0.0), (b, 0.0), (s, args.slowdown)):
                    run(results, run_id, req_file, slowdown)
            floor_runs = cal + [x for j in range(i) for x in (f"a{j}", f"b{j}")]  # A/A runs the store held before
            line = judge_pair(store, [a], [b], [s], floor_runs, t)
            print(f"pair {i}: {line} over {len(floor_runs)} A/A runs ({time.perf_counter() - t0:.0f} s)", flush=True)
        print_table(
            f"{args.pairs} A/A pairs of single runs (+{args.calibration} calibration runs), {args.repeats} "
            f"repeats per run, {args.prompts} requests per point and repeat; slowdown {args.slowdown:.0%}; "
            f"floor from the A/A runs before each pair",
            t,
        )
        k = args.sides
        if k >= 2 and args.pairs >= k:
            t = totals()
            for g in range(args.pairs // k):
                idx = range(g * k, (g + 1) * k)
                line = judge_pair(store, [f"a{i}" for i in idx], [f"b{i}" for i in idx], [f"s{i}" for i in idx], cal, t)
                print(f"sides {g}: {k} v {k} runs: {line}", flush=True)
            print_table(
                f"{args.pairs // k} comparisons of {k} v {k} runs (unit: the run; floor from the "
                f"{args.calibration} calibration runs)",
                t,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
