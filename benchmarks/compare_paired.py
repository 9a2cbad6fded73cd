"""Variants measured inside one run, interleaved: does `compare RUN --config A --vs S` find a real 10 % slowdown
that runs measured apart cannot, and does it stay quiet on an identical copy (a benchmark, not a test)?

Every run is one serve_sweep lane on the CPU server (tiny model, shape 16:8, concurrency 1 and 2) with four
server configs declared as variants: A, two identical copies of it (A2, A3) and S, A with every forward pass
SLOWDOWN slower (``extra_args: ["--slowdown", "0.1"]``). `repeat_order: balanced` with REPEATS repeats: each
repeat boots and measures every config in turn, the turn reversed every other repeat (A A2 A3 S, S A3 A2 A, …).
Per run, two paired comparisons (unit: the repeat pair; test: paired t on ln(b/a), Holm; floor: the A/A pairs
of a copy):

  A/A        A against A2, floor from A3 (--floor-vs A3): every `faster`/`slower` row is a false verdict
  slowdown   A against S,  floor from A2 (--floor-vs A2): rows called `slower` are the power

Printed per run and in total, per metric family: A/A rows judged and false verdicts, slowdown rows judged and
found `slower`, comparisons that would exit 1.

    .venv/bin/python benchmarks/compare_paired.py [--runs 5] [--repeats 8] [--prompts 30] [--slowdown 0.1]
                                                  [--results DIR] [--analyse]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_aa import run as run_local  # noqa: E402  (one `run --local` per run id; slowdown 0: S sets its own)

from analytics.report.sides import compare_configs  # noqa: E402 - after the repository root is put on sys.path
from analytics.store import open_store  # noqa: E402 - after the repository root is put on sys.path

REAL = ("faster", "slower")


def request(repeats: int, prompts: int, slowdown: float) -> dict:
    variants = {
        "A": {},
        "A2": {"base": "A", "description": "an identical copy of A (A/A)"},
        "A3": {"base": "A", "description": "a second identical copy (the A/A comparison's floor)"},
        "S": {
            "base": "A",
            "extra_args": ["--slowdown", str(slowdown)],
            "description": f"A with every forward pass {slowdown:.0%} slower",
        },
    }
    return {
        "profile": "tiny",
        "lanes": ["serve_sweep"],
        "lane_config": {
            "serve_sweep": {
                "server_configs": variants,
                "shapes": {"A": ["16:8"]},
                "min_prompts": prompts,
                "prompts_per_stream": 1,
                "warmup_requests": 2,
                "max_concurrency": 2,
                "sweep_repeats": repeats,
                "repeat_order": "balanced",
            }
        },
    }


def tally(entry: dict, counted: tuple[str, ...], hits: Counter, judged: Counter) -> None:
    for r in entry["rows"]:
        if r["verdict"] == "untested":
            continue
        fam = r["metric"].rsplit(" · ", 1)[-1]
        judged[fam] += 1
        hits[fam] += r["verdict"] in counted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=30, help="measured requests per point and repeat")
    ap.add_argument("--slowdown", type=float, default=0.10)
    ap.add_argument("--results", default=None, help="results root (default: a temporary directory)")
    ap.add_argument("--analyse", action="store_true", help="run nothing: judge the runs already in --results")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = args.results or str(Path(tmp) / "results")
        req_file = str(Path(tmp) / "request.json")
        Path(req_file).write_text(json.dumps(request(args.repeats, args.prompts, args.slowdown)))
        store = open_store(results)
        false, aa_judged, slower, s_judged = Counter(), Counter(), Counter(), Counter()
        aa_exit = s_exit = s_faster = 0
        for i in range(args.runs):
            run_id = f"p{i}"
            wall = 0.0 if args.analyse else run_local(results, run_id, req_file, 0.0)
            same = compare_configs(store, [run_id], "A", "A2", "A3")
            slow = compare_configs(store, [run_id], "A", "S", "A2")
            f, j, s, sj = Counter(), Counter(), Counter(), Counter()
            tally(same, REAL, f, j)
            tally(slow, ("slower",), s, sj)
            for total, part in ((false, f), (aa_judged, j), (slower, s), (s_judged, sj)):
                total.update(part)
            aa_exit += any(r["regression"] for r in same["rows"])
            s_exit += any(r["regression"] for r in slow["rows"])
            s_faster += sum(r["verdict"] == "faster" for r in slow["rows"])
            pct = sorted(
                round(r["pct"], 1) for r in slow["rows"] if r["pct"] is not None and "throughput" not in r["metric"]
            )
            print(
                f"run {i}: A/A {sum(f.values())} false of {sum(j.values())} judged; slowdown {sum(s.values())} "
                f"slower of {sum(sj.values())} judged "
                f"(latency deltas {pct[0] if pct else '-'}..{pct[-1] if pct else '-'} %)"
                f" ({wall:.0f} s)",
                flush=True,
            )
        tot = lambda c: sum(c.values())  # noqa: E731 - a one-line total
        print(
            f"\n{args.runs} runs, each: A, A2, A3, S interleaved (balanced), {args.repeats} repeats, {args.prompts} "
            f"requests per point and repeat; slowdown {args.slowdown:.0%}"
        )
        print(f"{'family':<18} {'A/A: false/judged':>18} {'slowdown: slower/judged':>24}")
        for fam in sorted(set(aa_judged) | set(s_judged)):
            print(f"{fam:<18} {false[fam]:>8}/{aa_judged[fam]:<9} {slower[fam]:>12}/{s_judged[fam]:<11}")
        print(f"{'all':<18} {tot(false):>8}/{tot(aa_judged):<9} {tot(slower):>12}/{tot(s_judged):<11}")
        print(
            f"A/A comparisons that would exit 1: {aa_exit} of {args.runs}; slowdown comparisons exiting 1: "
            f"{s_exit} of {args.runs}; slowdown rows called faster: {s_faster}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
