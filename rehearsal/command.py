"""`neuronpipe rehearse [--input run.json]`: the AWS run of a request, executed end to end on this machine.

moto is AWS, the resources come from the synthesized templates, boxes are sandbox directories whose SSM
agent runs the state machine's commands through /bin/sh, Lambdas run with exactly the layer's packages
(see ``rehearsal``). Exit 0 only when the run succeeded and no box is left running.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rehearse",
        help="rehearse the AWS run of a request on this machine (moto + sandboxes)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("--input", default=None, help="a RunRequest JSON file (default: the full preset, tiny profile)")
    p.add_argument("--run-id", default="rehearsal-1", help="execution name of the rehearsed run")
    p.add_argument("--workdir", default=None, help="where the boxes' sandboxes go (default: a temp dir)")
    p.add_argument("--build-dir", default="build/rehearsal", help="synthesized app and layer cache")
    p.add_argument("--boot-delay-s", type=float, default=2.0, help="StartInstances -> SSM agent registered")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="give up on the execution after this")
    p.add_argument("--no-live", action="store_true", help="one line per progress change instead of a live table")
    p.set_defaults(func=rehearse_command)


def rehearse_command(args: argparse.Namespace) -> int:
    from control_plane.commands.plan import load_request
    from control_plane.console import make_console
    from control_plane.models import RunRequest, RunRequestError
    from rehearsal.run import Rehearsal, RehearsalError

    console = make_console(stderr=True)  # summary lines and tables stay whole in logs and pipes
    try:
        request = (
            load_request(args.input, args.run_id)
            if args.input is not None
            else RunRequest(preset="full", profile="tiny")
        )
        if "profile" not in request.model_fields_set:  # a rehearsal runs on this machine: tiny unless asked
            request = request.model_copy(update={"profile": "tiny"})
    except (RunRequestError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="neuronpipe-rehearsal-"))
    started = time.monotonic()
    try:
        with Rehearsal(
            workdir, build_dir=Path(args.build_dir), boot_delay_s=args.boot_delay_s, log=lambda s: console.print(s)
        ) as rehearsal:
            console.print(
                f"AWS is up (moto at {rehearsal.world.endpoint}); boxes under {workdir}/boxes; "
                f"setup {sum(rehearsal.timings.values()):.0f} s"
            )
            return _run(rehearsal, request, args, console, workdir, started)
    except RehearsalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(rehearsal, request, args: argparse.Namespace, console, workdir: Path, started: float) -> int:
    """Start the request as `run --aws` would, follow it live, then pull + report and summarize."""
    from control_plane.aws import RunAlreadyStartedError
    from control_plane.commands.plan import print_plan
    from control_plane.commands.status import follow_shown, render_progress
    from control_plane.launch import LAUNCH_ERRORS
    from rehearsal.report_check import ReportCheckError, pull_and_report
    from rehearsal.summary import summarize

    try:
        launched = rehearsal.start(request, args.run_id)
    except (*LAUNCH_ERRORS, RunAlreadyStartedError) as exc:
        print(f"error: the run was refused: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print_plan(launched.plan, console)
    console.print(f"started {launched.execution_arn}")
    final = follow_shown(
        console,
        lambda show: rehearsal.follow(launched.execution_arn, show, deadline_s=args.timeout_s),
        live=not args.no_live,
    )
    console.print(render_progress(final))
    rehearsal.settle()
    history = rehearsal.history(launched.execution_arn)
    running = rehearsal.running_boxes()
    check = None
    if final.status == "SUCCEEDED":
        settings = rehearsal.settings()
        try:
            check = pull_and_report(
                rehearsal.world.client("s3", rehearsal.operator()),
                settings.results_uri,
                settings.reports_prefix,
                args.run_id,
                workdir,
            )
        except ReportCheckError as exc:
            print(f"error: {exc}", file=sys.stderr)
    console.print(summarize(rehearsal, launched.execution_arn, history, final, running, time.monotonic() - started))
    if check is not None:
        console.print(check.line())
    ok = final.status == "SUCCEEDED" and not running and check is not None and check.same_sections
    return 0 if ok else 1
