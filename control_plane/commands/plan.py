"""`neuronpipe plan --input run.json`: validate a request and print its plan; touches no AWS.

Refused (exit 2, one ``invalid request <file>: field: reason`` line per problem, nothing started):
an invalid request, a ``max_cost_usd`` above the deployment's ceiling or a worst case above the
effective ceiling, a lane config that does not fit its lane, an input file or execution input over
``control_plane.models.MAX_EXECUTION_INPUT_BYTES``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="validate a RunRequest and print its plan and worst-case cost (no AWS)")
    p.add_argument("--input", required=True, help="RunRequest JSON file (see examples/run-*.json)")
    p.add_argument("--run-id", default=None, help="override the request's run id")
    p.add_argument("--results", default="s3://<results-bucket>/results", help="results root shown in commands")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (the execution input's shape)")
    p.set_defaults(func=plan_command)


def load_request(path: str, run_id: str | None = None):
    """Read and validate a request file; RunRequestError names field and reason."""
    from control_plane.models import MAX_EXECUTION_INPUT_BYTES, RunRequestError, parse_request

    try:
        size = Path(path).stat().st_size
        if size > MAX_EXECUTION_INPUT_BYTES:
            raise RunRequestError(f"input: {path} is {size:,} bytes; a request is capped at "
                                  f"{MAX_EXECUTION_INPUT_BYTES:,} bytes (Step Functions allows 256 KiB of input)")
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunRequestError(f"input: cannot read {path}: {exc}") from exc
    if run_id is not None and isinstance(data, dict):
        data["run_id"] = run_id
    return parse_request(data)


def plan_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from control_plane.plan import PLAN_ERRORS, plan_run

    try:
        request = load_request(args.input, args.run_id)
        run_id = request.run_id or "<generated at start>"
        plan = plan_run(request, run_id=request.run_id or "run-id", results_uri=args.results,
                        ceiling_usd=deploy_ceiling())
    except PLAN_ERRORS as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"invalid request {args.input}: {line}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(plan.model_dump_json(indent=2))
        return 0
    print_plan(plan, Console(), run_id)
    return 0


def deploy_ceiling() -> float:
    """The deployment's cost ceiling (NEURONPIPE_MAX_COST_USD_CEILING, default $50)."""
    from control_plane.lean import DEFAULT_MAX_COST_USD_CEILING
    from control_plane.settings import SettingsError, get_settings

    try:
        return get_settings().max_cost_usd_ceiling
    except SettingsError:
        return DEFAULT_MAX_COST_USD_CEILING


def print_plan(plan, console, run_id: str | None = None) -> None:
    from rich.table import Table

    req = plan.request
    console.print(f"run id: [bold]{run_id or plan.run_id}[/bold]  preset: {req.preset or 'explicit lanes'}  "
                  f"profile: {req.profile}  force: {req.force}")
    console.print(f"models: {', '.join(req.models)}  server configs: {', '.join(req.server_configs)}")
    table = Table(title="plan")
    for col, justify in (("phase", "left"), ("box", "left"), ("lane", "left"), ("timeout", "right"),
                         ("heartbeat", "right"), ("config", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, phase in enumerate(plan.phases, 1):
        for step in phase.lanes:
            table.add_row(str(i), f"{phase.box_role} ({phase.instance_type})", step.lane, _hms(step.timeout_s),
                          _hms(step.heartbeat_s), json.dumps(step.config) if step.config else "")
    console.print(table)
    for phase in plan.phases:
        console.print(f"{phase.box_role}: at most {phase.max_instance_hours:.2f} instance-hours "
                      f"= ${phase.max_cost_usd:.2f}")
    for s in plan.skipped:
        console.print(f"[yellow]skipped[/yellow] {s.box_role}:{s.lane}: {s.reason}")
    console.print(f"worst case: {plan.max_instance_hours:.2f} instance-hours, [bold]${plan.max_cost_usd:.2f}[/bold] "
                  f"(ceiling ${plan.cost_ceiling_usd:.2f}); prices: {plan.price_source}")


def _hms(seconds: int) -> str:
    h, rem = divmod(int(seconds), 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"
