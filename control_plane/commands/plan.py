"""`neuronpipe plan --input run.json [--local]`: validate a request and print its plan; touches no AWS.

``--local`` prints what ``run --local --input run.json`` runs here (``control_plane.local_plan.plan_local``: the same
lanes, configs and checks, every lane on this machine, no boxes, no cost).

Refused (exit 2, one ``invalid request <file>: field: reason`` line per problem, nothing started):
an invalid request, a ``max_cost_usd`` above the deployment's ceiling or a worst case above the
effective ceiling, a lane config that does not fit its lane, an input file or execution input over
``control_plane.models.MAX_EXECUTION_INPUT_BYTES``.
An unknown ``--pricing`` model or a bad horizon is refused before the request is read; a type of the plan
without a price under the chosen model in its region, after the plan is built (``error: --pricing ...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from control_plane.commands._decision import (
    DecisionChoiceError,
    add_decision_arguments,
    check_types_priced,
    decision_choice,
)

EXIT_INVALID = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="validate a RunRequest and print its plan and worst-case cost (no AWS)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", help="RunRequest JSON file (see examples/run-*.json)")
    src.add_argument(
        "--schedules",
        metavar="CDK_JSON",
        help="plan every named schedule of this cdk.json (neuronpipe.schedules) and price a month of each",
    )
    p.add_argument(
        "--schedule",
        metavar="EXPRESSION",
        default=None,
        help="with --input: price a month of the request on this EventBridge cron(...) or rate(...)",
    )
    p.add_argument("--run-id", default=None, help="override the request's run id")
    add_decision_arguments(p)
    p.add_argument(
        "--results",
        default=None,
        help="results root shown in commands (default s3://<results-bucket>/results); --local: the "
        "results directory run --local would use (default results), whose earlier attempts of "
        "the run bind needs as on a resume",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="print what run --local runs here: the lane graph in run order, needs, configs",
    )
    p.add_argument(
        "--profile",
        default="tiny",
        choices=("tiny", "full"),
        help="--local: the profile when the request sets none (as run --local --profile)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (the execution input's shape; without --local plus what_if: the "
        "roofline's predicted bounds and the fit warnings, never stored)",
    )
    p.add_argument(
        "--check-quotas",
        action="store_true",
        help="a matrix: read the account's EC2 vCPU quotas (Service Quotas API, AWS credentials) and refuse "
        "a plan that needs more at once (launch always checks)",
    )
    p.add_argument(
        "--history",
        default=None,
        metavar="URI",
        help="results store whose lane_runs give expected lane durations (default: ./results when it "
        "exists, else NEURONPIPE_RESULTS); without one the documented default table is used",
    )
    p.set_defaults(func=plan_command)


def load_request(path: str, run_id: str | None = None):
    """Read and validate a request file; RunRequestError names field and reason."""
    from control_plane.models import MAX_EXECUTION_INPUT_BYTES, RunRequestError, parse_request
    from pipeline.jsonio import JsonInputError, read_json

    try:  # a regular file within the cap, UTF-8, no repeated key, bounded depth and numbers (pipeline.jsonio)
        data = read_json(path, MAX_EXECUTION_INPUT_BYTES, why="a request; Step Functions allows 256 KiB of input")
    except JsonInputError as exc:
        raise RunRequestError(f"input: {exc}") from exc
    if run_id is not None and isinstance(data, dict):
        data["run_id"] = run_id
    return parse_request(data)


def plan_command(args: argparse.Namespace) -> int:
    from control_plane.console import make_console
    from control_plane.plan import PLAN_ERRORS, plan_run

    if args.schedules:
        return plan_schedules_command(args)
    try:  # the Decision's pricing model and horizon: refused before the request is read
        choice = decision_choice(args)
    except DecisionChoiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.local:
        return plan_local_command(args)
    try:
        request = load_request(args.input, args.run_id)
        run_id = request.run_id or "<generated at start>"
        plan = plan_run(
            request,
            run_id=request.run_id or "run-id",
            results_uri=args.results or "s3://<results-bucket>/results",
            ceiling_usd=deploy_ceiling(),
        )
    except PLAN_ERRORS as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"invalid request {args.input}: {line}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        from control_plane.what_if import what_if_json

        print(json.dumps({**json.loads(plan.model_dump_json()), "what_if": what_if_json(plan)}, indent=2))
        return 0
    try:  # every type the plan runs on has a price under the chosen model in its region
        check_types_priced(choice, {seg.instance_type for seg in plan.segments if seg.instance_type}, plan.region)
    except DecisionChoiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    month = None
    if args.schedule:
        from control_plane.schedule_check import price_month
        from pipeline.schedules import ScheduleExpressionError

        try:
            month = price_month(args.schedule, plan.max_cost_usd)
        except ScheduleExpressionError as exc:
            print(f"invalid schedule --schedule: {exc}", file=sys.stderr)
            return EXIT_INVALID
    console = make_console()
    print_plan(plan, console, run_id)
    print_decision_choice(choice, console)
    if month is not None:
        console.print(
            f"a month on {args.schedule}: {month[0]} runs × ${plan.max_cost_usd:.2f} worst case = ${month[1]:.2f}",
            markup=False,
        )
    timetables = plan_timetables(plan, load_history(args.history), load_history(args.history, "box_boots"))
    print_timetable(timetables, console, {seg.box: seg.instance_type for seg in plan.segments if seg.box})
    print_what_if(plan, console)
    if plan.cells:
        print_matrix(plan, timetables, console)
        if args.check_quotas:
            from control_plane.quotas import QuotaExceededError, QuotaUnreadableError, ServiceQuotas, check_quotas

            try:
                for check in check_quotas(plan.quota_needs, ServiceQuotas(region=plan.region)):
                    console.print(f"  quota ok: {check.line()}", markup=False)
            except (QuotaExceededError, QuotaUnreadableError) as exc:
                for line in str(exc).splitlines():
                    print(f"invalid request {args.input}: {line}", file=sys.stderr)
                return EXIT_INVALID
    return 0


def print_decision_choice(choice, console) -> None:
    """The pricing model and the lifecycle horizon the run's Decision will be read for."""
    h = choice.horizon
    console.print(
        f"Decision: priced {choice.pricing}; lifecycle horizon {h.serving_hours:g} h serving, {h.redeploys} "
        f"redeploys, {'a fine-tune' if h.finetune else 'no fine-tune'}, utilization {h.utilization:g} "
        "(the report's lifecycle $/M: docs/reference/metrics.md)",
        markup=False,
        highlight=False,
    )


def plan_schedules_command(args: argparse.Namespace) -> int:
    """``plan --schedules cdk.json``: each schedule's month, or one line per refused schedule (exit 2)."""
    from control_plane.schedule_check import ScheduleRefusedError, check_schedules, deploy_context
    from pipeline.jsonio import JsonInputError, read_json

    try:
        context = deploy_context(read_json(args.schedules, 1 << 20, why="a cdk.json"))
        months = check_schedules(context, deploy_ceiling())
    except JsonInputError as exc:
        print(f"invalid schedules {args.schedules}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except ScheduleRefusedError as exc:
        for line in str(exc).splitlines():
            print(f"invalid schedules {args.schedules}: {line}", file=sys.stderr)
        return EXIT_INVALID
    for m in months:
        print(m.line())
    if not months:
        print(f"{args.schedules}: no schedules declared")
    return 0


def print_matrix(plan, timetables, console) -> None:
    """A matrix's cells (type, what each serves, worst case), the boxes at once, the expected wall time against the
    sum of the cells, the box-hours against one cell after the other, the quotas it needs."""
    from rich.table import Table

    from control_plane.timetable import hms
    from pipeline.instance_types import get_instance_type

    expected, graph, sequential, _ = timetables
    table = Table(
        title=f"matrix: {len(plan.cells)} cells, each on its own ephemeral box, at most "
        f"{plan.max_concurrency} boxes at once"
    )
    for col in ("cell", "instance type", "family", "model", "server config", "workload", "expected", "worst case"):
        table.add_column(col)
    by_box = {s.box: s for s in graph.segments}
    for c in plan.cells:
        seg = by_box.get(c["cell"])
        table.add_row(
            c["cell"],
            c["instance_type"],
            get_instance_type(c["instance_type"]).family,
            c["model"],
            c["server_config"],
            c["workload"] or "-",
            f"{hms(seg.end_s - seg.start_s)} ${seg.hours * graph.prices.get(seg.box, 0):.2f}" if seg else "-",
            f"{c['max_instance_hours']:.2f} h ${c['max_cost_usd']:.2f}",
        )
    console.print(table)
    cells = [s for s in graph.segments if s.box in {c["cell"] for c in plan.cells}]
    cell_sum = sum(s.end_s - s.start_s for s in cells)
    wall = max((s.end_s for s in cells), default=0.0) - min((s.start_s for s in cells), default=0.0)
    console.print(
        f"  expected wall time of the cells {hms(wall)} vs their sum {hms(cell_sum)} "
        f"(× {wall / cell_sum if cell_sum else 0:.2f} with {plan.max_concurrency} boxes at once); "
        f"box-hours {graph.box_hours:.2f} vs {sequential.box_hours:.2f} one box after the other "
        f"(× {graph.box_hours / sequential.box_hours if sequential.box_hours else 0:.2f})",
        markup=False,
    )
    for q in plan.quota_needs:
        console.print(
            f"  quota {q['quota_name']} (ec2/{q['quota_code']}, {q['region']}): needs {q['vcpus']} vCPUs "
            f"at once ({', '.join(q['types'])}); checked at launch (plan --check-quotas reads it now)",
            markup=False,
        )


def print_what_if(plan, console) -> None:
    """The roofline's bounds of each serving box, model and config with catalogue facts: predicted, not measured."""
    from rich.table import Table

    from control_plane.what_if import SOURCE, capacity_knees, plan_served, what_if_rows

    rows = what_if_rows(plan_served(plan))
    if not rows:
        return
    table = Table(title="roofline (PREDICTED, not measured: bounds from the hardware's facts; never stored)")
    for col in ("box", "instance type", "model", "config", "in/out", "batch", "TPOT ≥ ms", "TTFT ≥ ms", "out tok/s ≤"):
        table.add_column(col, justify="left" if col in ("box", "instance type", "model", "config") else "right")
    table.add_column("decode bound")
    table.add_column("source")
    for r in rows:
        table.add_row(
            r.box,
            r.instance_type,
            r.model,
            r.config,
            f"{r.input_len}/{r.output_len}",
            str(r.batch),
            f"{r.tpot_ms:.2f}",
            f"{r.ttft_ms:.1f}",
            f"{r.output_tokens_per_s:,.0f}",
            r.decode_bound_by,
            "PREDICTED",
        )
    console.print(table)
    for line in capacity_knees(plan):
        console.print(f"  {line}", markup=False)
    console.print(
        f"  every row: {SOURCE}; devices: " + "; ".join(sorted({f"{r.box}: {r.limits}" for r in rows})), markup=False
    )


def plan_local_command(args: argparse.Namespace) -> int:
    """``plan --local``: the plan ``run --local --input`` runs, refused as ``plan`` refuses (exit 2)."""
    from control_plane.console import make_console
    from control_plane.local import lanes_in_store
    from control_plane.local_plan import local_request, plan_local
    from control_plane.plan import PLAN_ERRORS
    from control_plane.run_ids import RunIdError
    from pipeline.servers import local_target

    results = args.results or "results"
    try:
        request = local_request(load_request(args.input, args.run_id), profile=args.profile)
        plan = plan_local(
            request,
            run_id=request.run_id or "run-id",
            results_uri=results,
            in_run=lanes_in_store(results) if Path(results).is_dir() else None,
            target=local_target(),
        )
    except (*PLAN_ERRORS, RunIdError) as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"invalid request {args.input}: {line}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    print_local_plan(plan, make_console(), request.run_id or "<generated at start>")
    return 0


def print_local_plan(plan, console, run_id: str | None = None) -> None:
    from rich.table import Table

    from pipeline.lanes import get_lane

    _print_request(plan.request, run_id or plan.run_id, console)
    table = Table(
        title="local plan (one lane process at a time unless --parallel; a lane starts when every lane "
        "it needs has finished)"
    )
    for col, justify in (("#", "right"), ("lane", "left"), ("needs", "left"), ("timeout", "right"), ("config", "left")):
        table.add_column(col, justify=justify)
    for i, node in enumerate(plan.nodes, 1):
        needs = (", ".join(node.needs) + (" (a gate)" if node.gate else "")).strip()
        config = plan.configs.get(node.lane)
        table.add_row(
            str(i), node.result_lane, needs, _hms(get_lane(node.lane).timeout_s), json.dumps(config) if config else ""
        )
    console.print(table)
    print_server_configs(plan.request, [n.lane for n in plan.nodes], "cpu", console)
    print_accuracy(plan.request, [n.lane for n in plan.nodes], "cpu", console)
    print_predictions(plan.request, console)
    console.print(
        f"results: {plan.results_uri}  (lanes already committed for the run are skipped unless forced; "
        "no instance cost)",
        markup=False,
    )


def print_predictions(req, console) -> None:
    """The request's predictions, registered before the first lane and scored in the report: target, expected,
    figure range, note (nothing when it has none)."""
    from rich.table import Table

    if not req.predictions:
        return
    from pipeline.predictions import predictions_digest

    table = Table(
        title=f"predictions ({len(req.predictions)}, {predictions_digest(req.predictions)[:19]}): registered before "
        "the first lane, scored in the report's Predicted vs observed"
    )
    for col in ("#", "target", "expected", "figure range", "note"):
        table.add_column(col, justify="right" if col == "#" else "left")
    for i, p in enumerate(req.predictions):
        table.add_row(str(i), p.target, p.expected, p.figure.range_text() if p.figure else "", p.note or "")
    console.print(table)


def load_history(uri: str | None, table: str = "lane_runs") -> list[dict]:
    """``table``'s rows of the history store (empty when there is none); an unreadable store is said, not fatal."""
    import os

    from analytics.store import open_store

    if uri is None:
        uri = "results" if Path("results").is_dir() else os.environ.get("NEURONPIPE_RESULTS")
        if not uri:
            return []
    elif not uri.startswith("s3://") and not Path(uri).is_dir():
        print(f"history {uri}: not a results directory; using the default durations", file=sys.stderr)
        return []
    try:
        return open_store(uri).read_table(table).to_pylist()
    except Exception as exc:  # noqa: BLE001 - the plan is still useful with the default table
        print(f"history {uri}: unreadable ({type(exc).__name__}: {exc}); using the default durations", file=sys.stderr)
        return []


def plan_timetables(plan, history_rows: list[dict], boot_rows: list[dict] | None = None):
    """(durations with sources per lane, graph timetable, sequential timetable) for the lanes the plan will run, in
    the plan's own waves (already-committed lanes are not in it)."""
    from control_plane.cost import INSTANCE_PRICES_USD_PER_HOUR, INSTANCE_TYPES
    from control_plane.plan import BOX_ORDER
    from control_plane.timetable import (
        expected_duration,
        history_durations,
        planned_lane,
        segment_overhead,
        timetable_graph,
        timetable_sequential,
    )
    from pipeline.graph import Node
    from pipeline.instance_types import get_instance_type
    from pipeline.lanes import get_lane

    nodes = [
        Node(
            step.lane,
            seg.box or step.box_role,
            step.result_lane or step.lane,
            get_lane(step.lane).order,
            tuple(step.needs),
            step.gate,
            wave.wave,
        )
        for wave in plan.waves
        for seg in wave.segments
        for step in seg.lanes
    ]
    types = {**INSTANCE_TYPES, **{seg.box: seg.instance_type for seg in plan.segments if seg.box}}
    history = history_durations(history_rows)
    configs = {
        (seg.box or step.box_role, step.result_lane or step.lane): step.config
        for wave in plan.waves
        for seg in wave.segments
        for step in seg.lanes
    }
    expected = {}
    for n in nodes:
        it = types.get(n.box)
        backend = get_instance_type(it).backend if it else "neuron"
        lane = planned_lane(n.lane, plan.request.profile, backend, configs.get((n.box, n.result_lane)))
        expected[n.result_lane] = (
            n,
            expected_duration(
                n.lane,
                plan.request.profile,
                it,
                history,
                models=lane.models,
                fingerprints=lane.fingerprints,
                default=lane.default,
            ),
        )
    durations = {name: e.seconds for name, (_, e) in expected.items()}
    prices = {
        box: (INSTANCE_PRICES_USD_PER_HOUR.get(it) or get_instance_type(it).price(plan.region))
        for box, it in types.items()
    }
    overhead = segment_overhead(boot_rows or [])
    order = [*BOX_ORDER, *(c["cell"] for c in plan.cells)]
    return (
        expected,
        timetable_graph(nodes, durations, prices, order, overhead.seconds, plan.max_concurrency),
        timetable_sequential(nodes, durations, prices, order, overhead.seconds),
        overhead,
    )


def print_timetable(timetables, console, box_types: dict | None = None) -> None:
    from rich.table import Table

    from control_plane.cost import INSTANCE_TYPES
    from control_plane.lane_history import RULE_TEXT
    from control_plane.timetable import SOURCES, hms

    expected, graph, sequential, overhead = timetables
    box_types = dict(box_types or {})
    console.print(
        f"expected timetable (lane durations below; {overhead.seconds:.0f} s per box start + sync + seed "
        f"+ push + stop, {overhead.source}; the cost ceiling is checked against the timeouts above, not "
        "this):"
    )
    for sched in (graph, sequential):
        console.print(
            f"  [bold]{sched.name}[/bold]: wall {hms(sched.wall_s)}, {sched.box_hours:.2f} box-hours, "
            f"${sched.cost_usd:.2f}"
        )
        for seg in sched.segments:
            console.print(
                f"    {seg.box} ({box_types.get(seg.box, INSTANCE_TYPES.get(seg.box, seg.box))}) wave {seg.wave}: "
                f"{hms(seg.start_s)} – {hms(seg.end_s)}: {', '.join(lane for lane, _, _ in seg.lanes)}"
            )
    console.print(f"  critical path: {' → '.join(graph.critical_path)}")
    if sequential.wall_s > 0 and sequential.box_hours > 0:
        console.print(
            f"  graph vs sequential: wall × {graph.wall_s / sequential.wall_s:.2f}, box-hours "
            f"{100 * (graph.box_hours / sequential.box_hours - 1):+.1f} %, "
            f"dollars {100 * (graph.cost_usd / sequential.cost_usd - 1):+.1f} %"
        )
    table = Table(title="expected lane durations")
    for col in ("lane", "box", "expected", "source"):
        table.add_column(col)
    for name, (node, exp) in sorted(expected.items(), key=lambda kv: (kv[1][0].box != "trn1", kv[1][0].order)):
        table.add_row(name, node.box, hms(exp.seconds), exp.source)
    console.print(table)
    used = {
        exp.source.removeprefix("default:").strip().split(" ", 1)[0].rstrip(":")
        for _, exp in expected.values()
        if exp.source.startswith("default:")
    }
    for key, text in SOURCES.items():
        if key in used:
            console.print(f"  {key}: {text}", markup=False)
    console.print(f"  {RULE_TEXT}", markup=False)


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

    _print_request(plan.request, run_id or plan.run_id, console)
    table = Table(title="plan (waves run one after the other; in a wave the boxes work at once)")
    for col, justify in (
        ("wave", "left"),
        ("box", "left"),
        ("lane", "left"),
        ("needs", "left"),
        ("timeout", "right"),
        ("heartbeat", "right"),
        ("config", "left"),
    ):
        table.add_column(col, justify=justify)
    for wave in plan.waves:
        for seg in wave.segments:
            for step in seg.lanes:
                needs = ", ".join(step.needs) + (" (a gate)" if step.gate else "")
                needs = needs.strip()
                table.add_row(
                    str(wave.wave),
                    f"{seg.box or seg.box_role} ({seg.instance_type})",
                    step.result_lane or step.lane,
                    needs,
                    _hms(step.timeout_s),
                    _hms(step.heartbeat_s),
                    json.dumps(step.config) if step.config else "",
                )
    console.print(table)
    for wave in plan.waves:
        for seg in wave.segments:
            console.print(
                f"wave {wave.wave} {seg.box or seg.box_role}: at most {seg.max_instance_hours:.2f} instance-hours "
                f"= ${seg.max_cost_usd:.2f}"
            )
    for s in plan.skipped:
        console.print(f"[yellow]skipped[/yellow] {s.box_role}:{s.lane}: {s.reason}")
    if plan.cells:
        print_cell_server_configs(plan, console)
    else:
        print_server_configs(
            plan.request, [st.lane for w in plan.waves for seg in w.segments for st in seg.lanes], "neuron", console
        )
    print_accuracy(
        plan.request, [st.lane for w in plan.waves for seg in w.segments for st in seg.lanes], "neuron", console
    )
    print_predictions(plan.request, console)
    from control_plane.what_if import fit_warnings, plan_served

    for line in fit_warnings(plan_served(plan)):
        console.print(f"[yellow]{line}[/yellow]")
    console.print(
        f"worst case: {plan.max_instance_hours:.2f} instance-hours (every lane to its timeout, every "
        f"retry), [bold]${plan.max_cost_usd:.2f}[/bold] (ceiling ${plan.cost_ceiling_usd:.2f}); "
        f"prices: {plan.price_source}"
    )


def print_server_configs(req, lanes: list[str], backend: str, console) -> None:
    """Each serving lane's server configs: what each sets, its boots, how many compile cold, the expected cost."""
    from control_plane.request_configs import lane_config

    rows = server_config_rows(req.profile, [(lane, lane_config(req, lane)) for lane in dict.fromkeys(lanes)], backend)
    if _print_boot_rows(rows, backend, console):
        print_workloads(req, lanes, console)


def print_cell_server_configs(plan, console) -> None:
    """A matrix's server configs, per cell on its own family (a cuda cell compiles nothing cold)."""
    from pipeline.instance_types import get_instance_type

    for seg in plan.segments:
        if seg.launch is None or not seg.box:
            continue
        backend = get_instance_type(seg.instance_type).backend
        rows = server_config_rows(plan.request.profile, [(st.lane, st.config) for st in seg.lanes], backend)
        rows = [dataclasses.replace(r, lane=f"{r.lane}@{seg.box}") for r in rows]
        _print_boot_rows(rows, backend, console, f" on {seg.box} ({seg.instance_type})")


def server_config_rows(profile: str, items: list, backend: str) -> list:
    """(lane, its config) -> each (model, server config)'s boots on ``backend`` (ConfigBoots rows)."""
    from control_plane.lane_configs import built_config
    from control_plane.request_configs import SERVER_CONFIGS_FIELD
    from control_plane.timetable import config_boots, limits_boots
    from pipeline.lanes import get_lane

    rows = []
    for lane, config in items:
        spec = get_lane(lane)
        if (built := built_config(spec, profile, config, SERVER_CONFIGS_FIELD)) is not None:
            rows += config_boots(lane, built, profile, backend)
        elif (built := built_config(spec, profile, config, "searches")) is not None:  # limits: its boot budget
            rows += limits_boots(lane, built, profile, backend)
    return rows


def _print_boot_rows(rows: list, backend: str, console, where: str = "") -> bool:
    """The training-probe lines and the server configs table of ``rows``; False when there is no table."""
    from rich.table import Table

    for r in (r for r in rows if r.unit == "training probe"):  # train_limits: each probe a short training run
        console.print(
            f"{r.lane} probe budget: {r.model} {r.sets}: at most {r.boots} training probes"
            f"{f', {r.cold} training-graph compiles' if r.cold else ''}, expected "
            f"{_hms(int(r.expected_s + 0.5))} ({r.source})",
            markup=False,
        )
    rows = [r for r in rows if r.unit != "training probe"]
    if not rows:
        return False
    how = (
        "a config's first boot compiles its graphs unless one with its fingerprint did; later boots load them"
        if backend == "neuron"
        else "no Neuron compile: every boot costs the same, none is cold"
    )
    table = Table(title=f"server configs{where} (family {backend}: {how})")
    for col, justify in (
        ("lane", "left"),
        ("model", "left"),
        ("config", "left"),
        ("fingerprint", "left"),
        ("sets", "left"),
        ("boots", "right"),
        ("cold", "right"),
        ("expected", "right"),
    ):
        table.add_column(col, justify=justify)
    for r in rows:
        table.add_row(
            r.lane, r.model, r.config, r.fingerprint, r.sets, str(r.boots), str(r.cold), _hms(int(r.expected_s + 0.5))
        )
    console.print(table)
    console.print(
        f"expected boot cost: {_hms(int(sum(r.expected_s for r in rows) + 0.5))} in all ({rows[0].source})",
        markup=False,
    )
    return True


def print_accuracy(req, lanes: list[str], backend: str, console) -> None:
    """The accuracy lane's cost, one line: evaluations x samples x expected per-sample latency + boots."""
    from control_plane.lane_configs import built_config
    from control_plane.request_configs import ACCURACY_LANE, lane_config
    from control_plane.timetable import boot_costs
    from pipeline.accuracy import expected_seconds
    from pipeline.lanes import get_lane
    from pipeline.servers import NEURON_BOX, local_target

    if ACCURACY_LANE not in lanes:
        return
    built = built_config(get_lane(ACCURACY_LANE), req.profile, lane_config(req, ACCURACY_LANE), "tasks")
    if built is None:
        return
    warm = boot_costs(req.profile, backend if req.profile == "full" else "cpu")[1]
    cost = expected_seconds(built, req.profile, NEURON_BOX if backend == "neuron" else local_target(), boot_s=warm)
    console.print(
        f"accuracy cost: expected {_hms(int(cost.seconds + 0.5))} = {cost.basis}; the lane's time budget "
        f"{_hms(int(built.time_budget_s))}",
        markup=False,
    )


def print_workloads(req, lanes: list[str], console) -> None:
    """Each serving lane's workloads, one line each: what its requests look like and when they are sent."""
    from control_plane.lane_configs import built_config
    from control_plane.request_configs import WORKLOAD_FIELD, WORKLOADS_FIELD, lane_config
    from pipeline.lanes import get_lane
    from pipeline.workloads import check_workloads, describe

    for lane in dict.fromkeys(lanes):
        spec, config = get_lane(lane), lane_config(req, lane)
        for field in (WORKLOADS_FIELD, WORKLOAD_FIELD):
            built = built_config(spec, req.profile, config, field)
            for w in check_workloads(getattr(built, field, None)) if built is not None else []:
                on = f" on {', '.join(w.configs)}" if w.configs else ""
                console.print(f"{lane} workload {w.name}{on}: {describe(w)}", markup=False)


def _print_request(req, run_id: str, console) -> None:
    """The plan's first lines: run id, preset, profile, force; models, server configs; the SLO."""
    from pipeline.slo import resolve_slo

    console.print(
        f"run id: [bold]{run_id}[/bold]  preset: {req.preset or 'explicit lanes'}  "
        f"profile: {req.profile}  force: {req.force}"
    )
    axes = req.matrix or {}  # a matrix's cells run its axes where it names them
    models, configs = axes.get("models") or req.models, axes.get("server_configs") or req.server_configs
    console.print(
        f"models: {', '.join(models)}  server configs: {', '.join(configs)}"
        f"{' (declared variants)' if isinstance(req.server_configs, dict) else ''}"
        f"{' (the matrix axes)' if axes else ''}"
    )
    slo = resolve_slo(req.slo, req.profile)
    console.print(
        f"SLO of every serving point{'' if req.slo is not None else ' (the profile default)'}: "
        f"{slo.name} (p{slo.percentile:g} TTFT <= {slo.ttft_ms:g} ms, p{slo.percentile:g} TPOT <= "
        f"{slo.tpot_ms:g} ms)",
        markup=False,
    )


def _hms(seconds: int) -> str:
    h, rem = divmod(int(seconds), 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"
