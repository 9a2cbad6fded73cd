"""`neuronpipe pull --from s3://BUCKET/results --to DIR`: an append-only mirror of committed results.

Every file copied is checked against its marker's SHA-256; a damaged source attempt is not mirrored (one
warning line each) and the command exits 1 after copying the rest.
"""

from __future__ import annotations

import argparse
import sys

from control_plane.commands import REGION_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help="mirror committed results into a local directory (append-only)")
    p.add_argument("--from", dest="source", required=True, help="results root to copy from (s3://bucket/prefix)")
    p.add_argument("--to", dest="mirror", default="results", help="local mirror directory")
    p.add_argument("--run-id", action="append", default=None, help="only these runs (repeatable)")
    p.add_argument("--with-models", action="store_true", help="also copy model weights under models/")
    p.add_argument(
        "--duckdb",
        default=None,
        metavar="FILE",
        help="after the pull, write a DuckDB file with every view over the mirror (for `duckdb FILE`)",
    )
    p.add_argument("--region", default=None, help="an s3:// --from: " + REGION_HELP)
    p.set_defaults(func=run)


def _s3_client(args: argparse.Namespace):
    """The S3 client of an s3:// source, in ``--region`` (else the default region); None for a directory."""
    if not str(args.source).startswith("s3://"):
        return None
    from control_plane.aws import aws_client, default_region

    return aws_client("s3", getattr(args, "region", None) or default_region())


def run(args: argparse.Namespace) -> int:
    import os

    from analytics.mirror import MirrorConflictError, pull, write_duckdb_file
    from analytics.store import LocalStore, StoreError
    from control_plane.commands._results import (
        ResultsInputError,
        check_run_ids,
        open_results,
        read_errors,
        refuse_store_overlap,
    )

    if not str(args.mirror).strip() or str(args.mirror).startswith("s3://"):
        print("error: --to must be a local directory", file=sys.stderr)
        return 2
    if os.path.exists(args.mirror) and not os.path.isdir(args.mirror):
        print(f"error: --to {args.mirror} is a file, not a directory", file=sys.stderr)
        return 2
    try:
        refuse_store_overlap(args.mirror, "--to", "store")  # rule 16: a mirror is a store of its own
        refuse_store_overlap(args.duckdb, "--duckdb", "file", (args.mirror,))
        check_run_ids(args.run_id)
        source = open_results(args.source, s3_client=_s3_client(args))
    except ResultsInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    mirror = LocalStore(args.mirror)
    try:
        summary = pull(source, mirror, run_ids=args.run_id, with_models=args.with_models)
    except (MirrorConflictError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except read_errors() as exc:
        print(f"error: pull stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(
        f"{summary.markers_copied} new attempt(s), {summary.markers_present} already mirrored; "
        f"{summary.files_copied} file(s), {summary.bytes_copied:,} bytes copied"
        + (
            f"; {summary.models_skipped} model file(s) left in the source (--with-models)"
            if summary.models_skipped
            else ""
        )
    )
    print(f"runs: {', '.join(summary.run_ids) or 'none'}")
    if summary.damaged:
        print(
            f"{len(summary.damaged)} damaged attempt(s) in the source not mirrored (each named above); "
            f"`neuronpipe verify --results {args.source}` lists them",
            file=sys.stderr,
        )
    if args.duckdb:
        print(f"wrote {write_duckdb_file(mirror, args.duckdb, args.run_id)}")
    return 1 if summary.damaged else 0
