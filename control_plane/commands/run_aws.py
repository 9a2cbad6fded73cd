"""`neuronpipe run --aws --input run.json`: plan, start the execution, follow it until it ends; the exit code is
the run's outcome (``pipeline.graph.exit_code``: 0 succeeded, 3 partial, 1 failed or its report not written; 2
refused)."""

from __future__ import annotations

import argparse
import sys

EXIT_INVALID = 2


def run_aws(args: argparse.Namespace) -> int:
    from analytics.store import open_store
    from control_plane.aws import (
        Executions,
        InstanceFleet,
        InstanceLookupError,
        Leases,
        RunAlreadyStartedError,
        aws_client,
        default_region,
    )
    from control_plane.commands.plan import load_request, print_plan
    from control_plane.commands.status import follow_shown, render_progress
    from control_plane.console import make_console
    from control_plane.cost import CostCeilingError
    from control_plane.launch import LAUNCH_ERRORS, committed_in_store, launch
    from control_plane.models import PlanNotReadyError, RunRequestError
    from control_plane.plan import EmptyPlanError
    from control_plane.progress import CommittedLanes, follow
    from control_plane.run_ids import new_run_id
    from control_plane.settings import SettingsError, get_settings

    console = make_console(stderr=True)
    if not args.input:
        print("error: --aws needs --input run.json (a RunRequest; see examples/run-*.json)", file=sys.stderr)
        return EXIT_INVALID
    try:
        request = load_request(args.input, args.run_id)
        if args.force:
            request = request.model_copy(update={"force": True})
        settings = get_settings()
        if str(args.results).startswith("s3://"):
            settings = settings.model_copy(update={"results_uri": args.results})
        settings.require("results_uri")
        run_id = request.run_id or new_run_id()
        region = getattr(args, "region", None) or default_region()
        executions = Executions(aws_client("stepfunctions", region))
        launched = launch(
            request,
            run_id,
            settings,
            fleet=InstanceFleet(settings.project, aws_client("ec2", region)),
            executions=executions,
            committed=committed_in_store(settings.results_uri or "", aws_client("s3", region)),
            leases=Leases(settings.lease_table, aws_client("dynamodb", region)),
        )
    except (
        RunRequestError,
        CostCeilingError,
        EmptyPlanError,
        SettingsError,
        PlanNotReadyError,
        InstanceLookupError,
        RunAlreadyStartedError,
        *LAUNCH_ERRORS,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print_plan(launched.plan, console)
    console.print(f"started {launched.execution_arn}")
    lanes = CommittedLanes(open_store(settings.results_uri or "", aws_client("s3", region)))  # a distributed wave's
    final = follow_shown(
        console,
        lambda show: follow(executions, launched.execution_arn, settings.poll_s, show, committed=lanes),
        live=not args.no_live,
    )
    console.print(render_progress(final))
    print(run_id)
    return final.exit_code()  # 0 succeeded, 3 partial, 1 failed or its report not written
