"""`neuronpipe verify [--results URI] [--repair]`: is every committed file the one its marker names?

Exit codes: 0 clean (known, quarantined damage included), 1 problems found, 2 bad input.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every committed file against its marker; list leftovers (--repair)")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--repair", action="store_true",
                   help="quarantine damaged attempts (append-only) and remove uncommitted leftovers older than "
                        "--min-age-hours; committed data is never deleted")
    p.add_argument("--min-age-hours", type=float, default=48.0, metavar="H",
                   help="safety age: --repair leaves younger leftovers (a lane may still be writing them)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging

    quiet = logging.getLogger("analytics.store.integrity")  # findings are printed as findings, not as warnings
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _verify(args)
    finally:
        quiet.setLevel(level)


def _verify(args: argparse.Namespace) -> int:
    import math

    from analytics.store import StoreError, open_existing_store
    from analytics.store.verify import repair, verify_store

    if not math.isfinite(args.min_age_hours) or args.min_age_hours < 0:
        print(f"error: --min-age-hours must be a number >= 0, not {args.min_age_hours}", file=sys.stderr)
        return 2
    try:
        store = open_existing_store(args.results)
        report = verify_store(store)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - S3 access errors and the like: one line, no traceback
        print(f"error: cannot read {args.results}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for f in report.findings:
        print(f.line())
    problems = sum(1 for f in report.findings if f.kind in ("corrupt", "missing", "orphaned", "temp"))
    print(f"checked {report.markers} marker(s), {report.files} file(s), {report.bytes:,} bytes: "
          + ("clean" if report.clean else f"{problems} problem(s)"))
    if not args.repair:
        return 0 if report.clean else 1
    summary = repair(store, report, args.min_age_hours * 3600)
    print(f"repair: {len(summary.quarantined)} attempt(s) quarantined, {len(summary.removed)} leftover(s) removed"
          + (f", {len(summary.kept_young)} younger than {args.min_age_hours:g} h kept" if summary.kept_young else "")
          + (f", {len(summary.kept_remote)} on S3 kept (remove them with a lifecycle rule)"
             if summary.kept_remote else ""))
    after = verify_store(store)
    return 0 if after.clean else 1
