"""Whether the Decision calls a type cheaper than itself: A/A pairs of real runs of one type (a benchmark, not a
test; docs/explanation/decision-noise.md states its figures).

Every run is one serve_sweep lane on the CPU backend, tiny profile (tiny model, config A, shape 16:8, concurrency
1 and 2, its SLO), priced as one instance type (``run --local --price-as TYPE``). The script makes RUNS such runs
back to back, keeps each run's Decision row (report_decision_hardware: the candidate's $/M at the SLO with its
point interval), and writes them to ROWS (JSON). Then every pair (i, j) of runs is judged as two candidates of one
Decision group (run j's row relabelled as a second type at the same price) by 78_report_decision_noise.sql, and
the script counts the pairs the view calls ``cheaper`` either way: each one is a false verdict. With one run per
side the run-level component is the prior (or the A/A history the rows hold, with ``--history``), at its one-sided
95 % upper confidence bound as the view uses it.

tests/unit/test_decision_noise.py judges the stored rows again (tests/fixtures/decision_aa/rows_quiet.json: 10 runs
on the otherwise idle host; rows_loaded.json: 8 runs while other work loaded it; each made once by this script), so
the A/A rate is checked without running anything.

    .venv/bin/python benchmarks/decision_aa.py [--runs 6] [--prompts 24] [--price-as inf2.xlarge]
                                               [--rows tests/fixtures/decision_aa/rows_quiet.json] [--analyse]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from compare_aa import run as local_run  # noqa: E402 - benchmarks/ is put on sys.path above

from analytics.decision_noise import aa_pairs  # noqa: E402 - after the repository root is put on sys.path

ROWS = ROOT / "tests" / "fixtures" / "decision_aa" / "rows_quiet.json"
# the columns of report_decision_hardware the noise view reads (and what the fixture keeps of each run)
KEEP = (
    "run_id",
    "instance",
    "instance_type",
    "family",
    "lane",
    "cell",
    "model",
    "server_config",
    "workload",
    "input_len",
    "output_len",
    "slo_name",
    "decision_group",
    "decision_section",
    "is_reference",
    "candidate",
    "ranked_basis",
    "ranked_usd_per_million_output_tokens",
    "ranked_usd_per_million_output_tokens_ci_low",
    "ranked_usd_per_million_output_tokens_ci_high",
    "capacity_tok_s",
    "usd_per_hour",
    "verdict",
)


def request(prompts: int) -> dict:
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
            }
        },
    }


def decision_rows(results: str) -> list[dict]:
    from analytics.report.rows import rows
    from analytics.store import open_store
    from analytics.views import connect

    con = connect(open_store(results))
    cols = ", ".join(KEEP)
    return rows(con, f"SELECT {cols} FROM report_decision_hardware WHERE candidate ORDER BY run_id")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--prompts", type=int, default=24, help="measured requests per point")
    ap.add_argument("--price-as", default="inf2.xlarge")
    ap.add_argument("--rows", default=str(ROWS), help="where the runs' Decision rows are written (JSON)")
    ap.add_argument("--results", default=None, help="results root (default: a temporary directory)")
    ap.add_argument("--analyse", action="store_true", help="run nothing: judge the rows already in --rows")
    args = ap.parse_args()
    if not args.analyse:
        with tempfile.TemporaryDirectory() as tmp:
            results = args.results or str(Path(tmp) / "results")
            req_file = str(Path(tmp) / "request.json")
            Path(req_file).write_text(json.dumps(request(args.prompts)))
            for i in range(args.runs):
                s = local_run(results, f"aa{i}", req_file, extra=("--price-as", args.price_as))
                print(f"run aa{i}: {s:.0f} s", flush=True)
            out = decision_rows(results)
        Path(args.rows).parent.mkdir(parents=True, exist_ok=True)
        Path(args.rows).write_text(json.dumps(out, indent=1, default=str) + "\n")
    stored = json.loads(Path(args.rows).read_text())
    for r in stored:
        print(
            f"{r['run_id']}: $/M {r['ranked_usd_per_million_output_tokens']:.4g} "
            f"[{r['ranked_usd_per_million_output_tokens_ci_low']:.4g}, "
            f"{r['ranked_usd_per_million_output_tokens_ci_high'] or float('inf'):.4g}] ({r['ranked_basis']})"
        )
    for history, adjacent in ((False, False), (True, False), (False, True), (True, True)):
        res = aa_pairs(stored, history=history, adjacent=adjacent)
        print(
            f"{'A/A history of the other runs' if history else 'prior'}"
            f"{', adjacent runs only' if adjacent else ', all pairs'}: {res['pairs']} pairs, "
            f"{res['cheaper']} called cheaper ({res['rate']:.1%}; P(cheaper) >= 0.95 alone: {res['cheaper_at_p95']}); "
            f"P(first cheaper) from {res['p_min']:.3f} to "
            f"{res['p_max']:.3f}; run-level sd source {', '.join(sorted(res['sources']))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
