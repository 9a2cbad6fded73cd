"""`neuronpipe verify [--results URI] [--repair]`: is every committed file the one its marker names?

Exit codes: 0 clean (known, quarantined damage included; legacy-format markers too with
``--allow-legacy-markers``), 1 problems found, 2 bad input (a path that is not a results store included),
3 nothing wrong found but some markers are of the legacy format and could not be checked.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every committed file against its marker; list leftovers (--repair)")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument(
        "--repair",
        action="store_true",
        help="quarantine damaged attempts (append-only) and remove uncommitted leftovers older than "
        "--min-age-hours; committed data is never deleted",
    )
    p.add_argument(
        "--min-age-hours",
        type=float,
        default=48.0,
        metavar="H",
        help="safety age: --repair leaves younger leftovers (a lane may still be writing them)",
    )
    p.add_argument(
        "--allow-legacy-markers",
        action="store_true",
        help="accept markers of the legacy format (no digest or checksums): still listed as "
        "unchecked, but exit 0 when nothing else is wrong (else exit 3)",
    )
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
    from analytics.store.locate import verify_target_problem
    from analytics.store.verify import repair, verify_store

    if not math.isfinite(args.min_age_hours) or args.min_age_hours < 0:
        print(f"error: --min-age-hours must be a number >= 0, not {args.min_age_hours}", file=sys.stderr)
        return 2
    allow = getattr(args, "allow_legacy_markers", False)
    try:
        store = open_existing_store(args.results)
        refusal, outer = verify_target_problem(store, args.results)
        if refusal is None and outer is not None and args.repair:
            refusal = (
                f"--repair: {args.results} is a store inside the results store {outer}; move it out "
                "first (nothing but a store's own commit protocol writes inside a store)"
            )
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 2
        if outer is not None:
            print(f"note: {args.results} is inside the results store {outer} (rule 16): move it out", file=sys.stderr)
        report = verify_store(store)
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - S3 access errors and the like: one line, no traceback
        print(f"error: cannot read {args.results}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for f in report.findings:
        print(f.line())
    print(
        f"checked {report.markers} marker(s), {report.files} file(s), {report.bytes:,} bytes: "
        + _verdict(report, allow)
    )
    if not args.repair:
        return report.exit_code(allow)
    summary = repair(store, report, args.min_age_hours * 3600)
    for root in summary.nested:
        print(f"repair: nested store at {root}: left alone")
    print(
        f"repair: {len(summary.quarantined)} attempt(s) quarantined, {len(summary.removed)} leftover(s) removed"
        + (f", {len(summary.kept_young)} younger than {args.min_age_hours:g} h kept" if summary.kept_young else "")
        + (
            f", {len(summary.kept_remote)} on S3 kept (remove them with a lifecycle rule)"
            if summary.kept_remote
            else ""
        )
        + (f", {len(summary.kept_named)} named by a commit marker kept" if summary.kept_named else "")
    )
    return verify_store(store).exit_code(allow)


def _verdict(report, allow: bool) -> str:
    """The summary line's verdict: a legacy marker is never called clean."""
    if report.problems:
        return f"{len(report.problems)} problem(s)"
    if report.unchecked:
        n = len(report.unchecked)
        return f"no problems found; {n} marker(s) unchecked (legacy marker format)" + (
            ", accepted (--allow-legacy-markers)" if allow else "; exit 3 (--allow-legacy-markers accepts them)"
        )
    return "clean"
