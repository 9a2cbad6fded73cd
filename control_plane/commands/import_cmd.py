"""`neuronpipe import torchneuronx SOURCE`: the hand-run predecessor's results as one run in our store.

SOURCE is a checkout or a bare git dir of the predecessor's layout (``trn1/results``, ``inf2/results``).
Everything is parsed and validated before the first write, so bad input gets one line, exit 2, and the
store is untouched. Importing the same run twice is refused unless ``--force`` (new attempts).
"""
from __future__ import annotations

import argparse
import sys

SOURCES = ("torchneuronx",)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import another harness's results (torchneuronx) as ordinary attempts")
    p.add_argument("kind", choices=SOURCES, help="the source's format")
    p.add_argument("source", help="a checkout or a bare git dir of the source repository")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", default=None, help="the run to commit into (default: torchneuronx-<commit>)")
    p.add_argument("--ref", default=None, help="the commit to import from a git SOURCE (default: HEAD)")
    p.add_argument("--history", action="store_true",
                   help="also import superseded versions of each result file, as earlier attempts in commit order")
    p.add_argument("--force", action="store_true", help="import again into an existing run (new attempts)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analytics.importers.common import ImportInputError
    from analytics.importers.source import SourceError
    from analytics.importers.torchneuronx import ImportExistsError, import_torchneuronx
    from analytics.store import StoreError, open_store

    try:
        if args.run_id is not None:
            from analytics.store import _validate_component

            _validate_component("run_id", args.run_id)
        store = open_store(args.results)
        summary = import_torchneuronx(args.source, store, run_id=args.run_id, ref=args.ref,
                                      history=args.history, force=args.force)
    except (SourceError, ImportInputError, ImportExistsError, StoreError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"imported {args.kind} {summary.commit or args.source} as run {summary.run_id} "
          f"({len(summary.attempts)} attempts) into {store.root}")
    for lane, attempt, status, counts in summary.attempts:
        rows = ", ".join(f"{t} {n}" for t, n in sorted(counts.items()) if t != "lane_runs")
        print(f"  {lane:16s} {status:9s} {attempt}  {rows}")
    return 0
