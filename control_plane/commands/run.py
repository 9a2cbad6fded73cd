"""`neuronpipe run --local | --aws`."""
from __future__ import annotations

import argparse
import secrets
import sys
from datetime import datetime, timezone


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the pipeline here (--local) or on AWS (--aws)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--local", action="store_true", help="run every lane here, each as its own process")
    where.add_argument("--aws", action="store_true", help="start a Step Functions execution and follow it")
    p.add_argument("--lanes", default=None, help="comma-separated lanes (default: the whole plan)")
    p.add_argument("--results", default="results", help="results root (directory or s3://bucket/prefix)")
    p.add_argument("--run-id", default=None, help="default: generated and printed")
    p.add_argument("--force", action="store_true", help="re-run lanes already committed for this run")
    p.add_argument("--profile", default="tiny", choices=("tiny", "full"), help="scale: tiny locally, full on boxes")
    p.add_argument("--report", default=None, metavar="DIR", help="after the lanes, build the report into DIR")
    p.add_argument("--input", default=None,
                   help="RunRequest JSON file (lanes or preset, lane_config, force; --aws: the whole request)")
    p.add_argument("--no-live", action="store_true", help="plain line output instead of the live view")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.aws:
        try:
            from control_plane.commands.run_aws import run_aws  # type: ignore[import-not-found]
        except ModuleNotFoundError:
            print("error: --aws is not available in this build", file=sys.stderr)
            return 2
        return run_aws(args)
    return run_local_command(args)


def run_local_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agents.registry import UnknownLaneError, plan_order
    from control_plane.commands.plan import load_request
    from control_plane.local import run_local
    from control_plane.models import RunRequestError

    console = Console(stderr=True)
    configs: dict[str, dict] = {}
    profile, force, run_id = args.profile, args.force, args.run_id
    try:
        if args.input:
            request = load_request(args.input)
            from control_plane.plan import selected_lanes

            lanes = [s.name for s in selected_lanes(request)]
            configs = {k: v for k, v in request.lane_config.items() if v}
            profile = request.profile if "profile" in request.model_fields_set else args.profile
            force = force or request.force
            run_id = run_id or request.run_id
        else:
            lanes = [s.name for s in plan_order([x.strip() for x in args.lanes.split(",") if x.strip()]
                                                if args.lanes else None)]
    except (UnknownLaneError, RunRequestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_id = run_id or new_run_id()
    console.print(f"run id: [bold]{run_id}[/bold]  results: {args.results}  profile: {profile}")
    outcome = run_local(lanes, run_id, args.results, profile=profile, force=force, console=console,
                        live=False if args.no_live else None, configs=configs)
    for state in outcome.failed:
        console.print(f"[red]lane {state.name} failed[/red]: {state.detail}")
    if outcome.interrupted:
        console.print("interrupted: run the same command again to resume at the first uncommitted lane")
        return outcome.exit_code
    print_summary(args.results, run_id, console)
    if args.report:
        from control_plane.commands.report import build_report_files

        paths = build_report_files(args.results, [run_id], args.report)
        report_md = next((p for p in paths if p.name == "REPORT.md"), None)
        plots = [p for p in paths if p.suffix == ".png"]
        console.print(f"report: [bold]{report_md}[/bold]  ({len(plots)} plots in {args.report})")
    print(run_id)
    return outcome.exit_code


def print_summary(results: str, run_id: str, console) -> None:
    """The run's headline numbers from the views (the report has the rest)."""
    from analytics.store import open_store
    from analytics.views import connect
    from control_plane.summary import render, summarize

    con = connect(open_store(results), run_ids=[run_id])
    render(summarize(con, run_id), console)
