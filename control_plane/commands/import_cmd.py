"""`neuronpipe import KIND ...`: another harness's results as ordinary attempts in our store.

* ``import torchneuronx SOURCE``: the hand-run predecessor's repository as one run (docs/guides/import.md).
* ``import vllm-bench RESULT.json... --label NAME --instance-type TYPE``: ``vllm bench serve --save-result``
  files from any machine as reference points of run ``ref-<label>``, lane ``reference`` (docs/guides/import.md).

Everything is parsed and validated before the first write, so bad input gets one line, exit 2, and the
store is untouched. Importing the same run twice is refused unless ``--force`` (new attempts).
"""

from __future__ import annotations

import argparse
import sys

SOURCES = ("torchneuronx", "vllm-bench")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import another harness's results (torchneuronx, vllm-bench) as attempts")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    t = kinds.add_parser("torchneuronx", help="the hand-run predecessor's trn1/inf2 results repository")
    t.add_argument("source", help="a checkout or a bare git dir of the source repository")
    t.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    t.add_argument("--run-id", default=None, help="the run to commit into (default: torchneuronx-<commit>)")
    t.add_argument(
        "--ref",
        default=None,
        help="the commit to import from a git SOURCE: a branch, tag or HEAD (optionally ~N or ^N) or a "
        "commit's hex id; never read by git as an option (default: HEAD)",
    )
    t.add_argument(
        "--history",
        action="store_true",
        help="also import superseded versions of each result file, as earlier attempts in commit order",
    )
    t.add_argument("--force", action="store_true", help="import again into an existing run (new attempts)")
    t.set_defaults(func=run)
    v = kinds.add_parser("vllm-bench", help="`vllm bench serve --save-result` files as labelled reference points")
    v.add_argument("files", nargs="+", metavar="RESULT.json", help="result files (one point each)")
    v.add_argument("--label", required=True, help="the reference's name, e.g. h100-vllm-0.11 (run ref-<label>)")
    v.add_argument("--instance-type", required=True, help="the instance it ran on, e.g. p5.48xlarge")
    v.add_argument(
        "--price-usd-per-h",
        type=float,
        default=None,
        help="its on-demand USD/hour (default: the price table's price for the instance type, if any)",
    )
    v.add_argument(
        "--slo",
        default=None,
        help="SLO set name or ttft_ms=..,tpot_ms=..[,percentile=..] "
        "(default: mlperf-v5.1-llama3.1-8b-server; docs/reference/slo.md)",
    )
    v.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    v.add_argument("--run-id", default=None, help="the run to commit into (default: ref-<label>)")
    v.add_argument("--force", action="store_true", help="import again into an existing run (a new attempt)")
    v.set_defaults(func=run_vllm_bench)


def run(args: argparse.Namespace) -> int:
    from analytics.importers.common import ImportExistsError, ImportInputError
    from analytics.importers.source import SourceError
    from analytics.importers.torchneuronx import import_torchneuronx
    from analytics.store import StoreError, open_store
    from analytics.store.locate import refuse_overlap

    try:
        refuse_overlap(args.results, "--results", "store")  # rule 16, before the source is read
        if args.run_id is not None:
            from analytics.store import validate_component

            validate_component("run_id", args.run_id)
        store = open_store(args.results)
        summary = import_torchneuronx(
            args.source, store, run_id=args.run_id, ref=args.ref, history=args.history, force=args.force
        )
    except (SourceError, ImportInputError, ImportExistsError, StoreError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"imported {args.kind} {summary.commit or args.source} as run {summary.run_id} "
        f"({len(summary.attempts)} attempts) into {store.root}"
    )
    for lane, attempt, status, counts in summary.attempts:
        rows = ", ".join(f"{t} {n}" for t, n in sorted(counts.items()) if t != "lane_runs")
        print(f"  {lane:16s} {status:9s} {attempt}  {rows}")
    if summary.predictions:
        print(f"  predictions: {summary.predictions} (its predicted-vs-observed table, with the verdicts it recorded)")
    for note in summary.notes:
        print(f"  note: {note}")
    return 0


def run_vllm_bench(args: argparse.Namespace) -> int:
    from analytics.importers.common import ImportExistsError, ImportInputError
    from analytics.importers.vllm_bench import import_vllm_bench
    from analytics.store import StoreError, open_store
    from analytics.store.locate import refuse_overlap
    from pipeline.slo import resolve_slo

    try:
        refuse_overlap(args.results, "--results", "store")  # rule 16, before any file is read
        slo = resolve_slo(args.slo, "full")
        store, summary = import_vllm_bench(
            args.files,
            lambda: open_store(args.results),
            label=args.label,
            instance_type=args.instance_type,
            slo=slo.to_json(),
            usd_per_hour=args.price_usd_per_h,
            run_id=args.run_id,
            force=args.force,
        )
    except (ImportInputError, ImportExistsError, StoreError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    price = (
        f"${args.price_usd_per_h:g}/h declared" if args.price_usd_per_h is not None else "price from the price table"
    )
    print(
        f"imported {len(summary.points)} vllm bench serve point(s) as run {summary.run_id} lane reference "
        f"(label {args.label}, {args.instance_type}, {price}; SLO {slo.name}) into {store.root}"
    )
    for p in summary.points:
        basis = f"per-request ({len(p.rows['requests'])} requests)" if p.per_request else "aggregate only"
        print(f"  {p.point_id:14s} {basis:28s} {p.source.path}")
        for note in p.notes:
            if not note.startswith("vLLM writes 'date'"):
                print(f"  {'':14s} note: {note}")
    return 0
