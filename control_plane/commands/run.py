"""`neuronpipe run --local | --aws`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from control_plane.commands import REGION_HELP
from control_plane.commands._decision import (
    DecisionChoiceError,
    add_decision_arguments,
    check_types_priced,
    decision_choice,
)

if TYPE_CHECKING:
    from control_plane.local_plan import LocalPlan


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
    p.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="after the lanes, build the report into DIR (comparison.json, REPORT.md, REPORT.html, plots)",
    )
    p.add_argument(
        "--no-html",
        dest="html",
        action="store_false",
        help="--report: leave REPORT.html out (it needs the plotly package)",
    )
    p.add_argument(
        "--input",
        default=None,
        help="RunRequest JSON file (lanes or preset, lane_config, force; --aws: the whole request)",
    )
    p.add_argument(
        "--slo",
        default=None,
        metavar="NAME|ttft_ms=..,tpot_ms=..",
        help="the SLO every serving point carries (goodput, the report's Decision table): a set name "
        "(docs/reference/slo.md) or ttft_ms=..,tpot_ms=..[,percentile=..]; default: the profile's; "
        "overrides the --input request's slo; a lane_config slo still wins",
    )
    p.add_argument(
        "--price-as",
        default=None,
        metavar="TYPE",
        help="--local: the on-demand instance type (analytics/pricing.py) that prices this host in the "
        "report's Decision table (recorded as lane_runs.priced_as; a declaration, not detected); "
        "the cost section still shows a local run as no instance cost",
    )
    add_decision_arguments(p)
    p.add_argument("--no-live", action="store_true", help="plain line output instead of the live view")
    p.add_argument("--region", default=None, help="--aws: " + REGION_HELP)
    p.add_argument(
        "--parallel",
        type=_positive_int,
        default=1,
        metavar="N",
        help="--local: run up to N lanes at once, each when every lane it needs has finished (default 1)",
    )
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def exit_now_if_cli(code: int) -> None:
    """After an interrupt every lane is gone and nothing is left to write: when this process is the CLI, end it
    here without the interpreter's finalization. A native library's worker thread (a reader's thread pool;
    seen in the kill audit) can still be joinable when an interrupt lands mid-read, and its destructor then
    aborts the process ("terminate called without an active exception", exit -6) instead of the promised 130.
    In-process callers (tests) get the code returned as usual."""
    import os

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if (spec is not None and spec.name == "control_plane.cli") or os.path.basename(sys.argv[0]) == "neuronpipe":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class ResultsRootError(ValueError):
    """``--results`` names something that cannot hold a results store (a file, a non-s3 URI)."""


def check_results_root(uri: str) -> str:
    """A local results root must be a directory or not exist yet (it is created); s3:// is checked when used."""
    from pathlib import Path

    if "://" in uri and not uri.startswith("s3://"):
        raise ResultsRootError(f"--results {uri}: use a directory or s3://bucket/prefix")
    if not uri.startswith("s3://") and Path(uri).exists() and not Path(uri).is_dir():
        raise ResultsRootError(
            f"--results {uri}: is not a directory (a results root is a directory or s3://bucket/prefix)"
        )
    if not uri.startswith("s3://"):  # found before any lane starts, not by the first lane's first write
        import os

        probe = Path(uri).expanduser().absolute()
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise ResultsRootError(f"--results {uri}: {probe} is a file, so the results root cannot be created")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ResultsRootError(f"--results {uri}: {probe} is not writable")
    from analytics.store.locate import overlap_problem

    if problem := overlap_problem(uri, "--results", "store"):  # rule 16: not inside or around another store
        raise ResultsRootError(problem)
    return uri


def check_report_dir(report: str | None, results: str) -> None:
    """``--report DIR`` outside every store, the run's own ``--results`` included (rule 16)."""
    from analytics.store.locate import overlap_problem

    if report and (problem := overlap_problem(report, "--report", "directory", (results,))):
        raise ResultsRootError(problem)


class EmptyLanesError(ValueError):
    """``--lanes`` given but naming no lane (``--lanes ""`` must not mean the whole plan)."""


def lane_list(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        from pipeline.lanes import lane_names

        raise EmptyLanesError(f"--lanes {text!r} names no lane; valid lanes: {', '.join(lane_names())}")
    return names


def run(args: argparse.Namespace) -> int:
    try:  # the Decision's pricing model and horizon: a bad one is refused before anything starts
        args.decision_choice = decision_choice(args)
        if not args.aws and getattr(args, "price_as", None) and args.decision_choice.pricing != "on-demand":
            from analytics.pricing import PRICE_REGION  # (on-demand: --price-as's own check names an unknown type)

            check_types_priced(args.decision_choice, [args.price_as], PRICE_REGION)
    except DecisionChoiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.aws and getattr(args, "price_as", None):
        print("error: --price-as prices a local host; an AWS run is priced by its instance types", file=sys.stderr)
        return 2
    if args.aws:
        try:
            from control_plane.commands.run_aws import run_aws
        except ModuleNotFoundError:
            print("error: --aws is not available in this build", file=sys.stderr)
            return 2
        return run_aws(args)
    return run_local_command(args)


def run_local_command(args: argparse.Namespace) -> int:
    """Refusals (exit 2, one line each, nothing written): a bad run id, ``--lanes`` naming no lane or an unknown
    one, an invalid request file, a lane_config that does not fit its lane (``lane.field: reason``)."""
    from analytics.pricing import UnknownInstancePriceError
    from control_plane.console import make_console
    from control_plane.lane_configs import LaneConfigInvalidError
    from control_plane.models import RunRequestError
    from control_plane.run_ids import RunIdError
    from pipeline.lanes import UnknownLaneError
    from pipeline.slo import SloError

    console = make_console(stderr=True)
    try:
        plan, priced_as = _local_plan(args)
    except LaneConfigInvalidError as exc:
        for line in str(exc).splitlines():
            print(f"error: lane_config {line}", file=sys.stderr)
        return 2
    except (UnknownLaneError, RunRequestError, RunIdError, EmptyLanesError, ResultsRootError, SloError) as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:  # one line per problem, each its own prefix
            print(f"error: {line}", file=sys.stderr)
        return 2
    except UnknownInstancePriceError as exc:
        print(f"error: --price-as: {exc}", file=sys.stderr)
        return 2
    if args.report and getattr(args, "html", True) and _chart_library_missing():  # before any lane runs
        return 2
    from control_plane.history import BaselineError, check_named_baseline

    try:  # a baseline naming a run of another request or instance type: one line, nothing started
        check_named_baseline(plan.results_uri, plan.run_id, plan.request, priced_as)
    except BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from control_plane.predictions import PredictionsChangedError, PredictionsRegistrationError

    try:
        registration = register_local(plan)
    except (PredictionsChangedError, PredictionsRegistrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if registration is not None:
        console.print(
            f"predictions: {registration.count} "
            f"{'registered' if registration.new else 'kept as registered'} at {registration.registered_at} "
            f"({registration.digest[:19]})",
            highlight=False,
        )
    return _run_local_plan(args, plan, priced_as, console)


def register_local(plan: LocalPlan):
    """The request's predictions committed to the run's store before its first lane (kept on a resume)."""
    from analytics.store import open_store
    from control_plane.predictions import register_predictions

    return register_predictions(open_store(plan.results_uri), plan.run_id, plan.request.predictions)


def _local_plan(args: argparse.Namespace) -> tuple[LocalPlan, str | None]:
    """The local plan of the command's request, and the price basis it declares; every argument checked first."""
    from analytics.pricing import price_for
    from control_plane.commands.plan import load_request
    from control_plane.local import lanes_in_store
    from control_plane.local_plan import local_request, plan_local
    from control_plane.run_ids import check_run_id, new_run_id
    from pipeline.servers import local_target
    from pipeline.slo import parse_slo

    check_results_root(args.results)
    check_report_dir(args.report, args.results)
    if args.run_id is not None:
        check_run_id(args.run_id)
    slo = getattr(args, "slo", None)
    slo = parse_slo(slo).to_config() if slo is not None else None
    priced_as = getattr(args, "price_as", None)
    if priced_as is not None:
        price_for(priced_as)
    if args.input is not None:  # `--input ""` is a missing file, never "no request"
        request = local_request(load_request(args.input), profile=args.profile, slo=slo, force=args.force)
    else:
        request = local_request(
            None,
            lanes=lane_list(args.lanes) if args.lanes is not None else None,
            profile=args.profile,
            slo=slo,
            force=args.force,
        )
    plan = plan_local(
        request,
        run_id=args.run_id or request.run_id or new_run_id(),
        results_uri=args.results,
        in_run=lanes_in_store(args.results),
        target=local_target(),
    )
    return plan, priced_as


def _chart_library_missing() -> bool:
    """``--report`` with its page: the chart library the page is built with must be there (said in one line)."""
    from analytics.report.html_assets import ChartLibraryMissingError, chart_library_path

    try:
        chart_library_path()
    except ChartLibraryMissingError as exc:
        print(f"error: --report: {exc}; or pass --no-html", file=sys.stderr)
        return True
    return False


def _run_local_plan(args: argparse.Namespace, plan: LocalPlan, priced_as: str | None, console: Any) -> int:
    """The plan's lanes run here; each failed lane's error and log, then the run's summary, report and outcome."""
    from rich.markup import escape

    from control_plane.local import run_plan
    from pipeline.graph import outcome_text

    run_id = plan.run_id
    console.print(
        f"run id: [bold]{run_id}[/bold]  results: {args.results}  profile: {plan.profile}"
        + (f"  parallel: {args.parallel}" if args.parallel > 1 else "")
        + (f"  priced as: {priced_as} (declared)" if priced_as else "")
    )
    outcome = run_plan(
        plan, console=console, live=False if args.no_live else None, parallel=args.parallel, priced_as=priced_as
    )
    for state in outcome.failed:  # the lane's own error, then where its whole log is
        console.print(
            f"[red]lane {state.name} failed[/red]: {escape(state.error or '')}", highlight=False, soft_wrap=True
        )
        console.print(f"  log: {escape(str(state.log_path))}", highlight=False, soft_wrap=True)
    if outcome.interrupted:
        console.print("interrupted: run the same command again to resume at the first uncommitted lane")
        exit_now_if_cli(outcome.exit_code)
        return outcome.exit_code
    print_summary(args.results, run_id, console)
    if plan.request.baseline is not None:  # judged before the report, whose first section reads the verdicts
        from control_plane.history import judge_local

        console.print(judge_local(args.results, run_id, plan.request), highlight=False, soft_wrap=True)
    if args.report:
        from analytics.report.files import build_report_files

        paths = build_report_files(
            args.results,
            [run_id],
            args.report,
            html=getattr(args, "html", True),
            choice=getattr(args, "decision_choice", None),
        )
        report_md = next((p for p in paths if p.name == "REPORT.md"), None)
        page = next((p for p in paths if p.suffix == ".html"), None)
        plots = [p for p in paths if p.suffix == ".png"]
        console.print(
            f"report: [bold]{report_md}[/bold]  ({len(plots)} plots in {args.report})"
            + (f"  page: {page}" if page else ""),
            soft_wrap=True,
        )
    result = outcome.run
    text = outcome_text(result) if result else ""
    console.print(
        f"outcome: [bold]{result.status if result else 'failed'}[/bold]" + (f" — {escape(text)}" if text else ""),
        highlight=False,
        soft_wrap=True,
    )
    print(run_id)
    return outcome.exit_code


def print_summary(results: str, run_id: str, console) -> None:
    """The run's headline numbers from the views (the report has the rest)."""
    from analytics.store import open_store
    from analytics.views import connect, view_files_through
    from control_plane.summary import SUMMARY_VIEWS_THROUGH, render, summarize

    con = connect(open_store(results), run_ids=[run_id], view_files=view_files_through(SUMMARY_VIEWS_THROUGH))
    render(summarize(con, run_id), console)
