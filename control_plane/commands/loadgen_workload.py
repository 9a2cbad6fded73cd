"""`neuronpipe loadgen --workload`: a production-shaped workload on the command line (pipeline.workloads): read,
checked and turned into the points it runs, before anything is sent."""

from __future__ import annotations

import argparse
from typing import Any


class WorkloadFlagError(ValueError):
    """``--workload`` / ``--workload-name`` that cannot be run: one line, nothing sent."""


def load_workload(spec: str, name: str | None) -> Any:
    """The workload of ``--workload SPEC``: an inline JSON object (SPEC starts with ``{``) or a .json file, holding
    one workload or a map {NAME: workload} (``name`` picks one). Raises WorkloadFlagError / WorkloadError."""
    from pipeline.jsonio import JsonInputError, loads, read_json
    from pipeline.workloads import WORKLOAD_FIELDS, parse_workload

    inline = spec.lstrip().startswith("{")
    try:
        doc = loads(spec) if inline else read_json(spec)
    except JsonInputError as exc:
        raise WorkloadFlagError(str(exc)) from exc
    if not isinstance(doc, dict) or not doc:
        raise WorkloadFlagError(
            "expected a workload object or a map {NAME: workload}, got "
            + ("an empty object" if doc == {} else f"a JSON {type(doc).__name__}")
        )
    if any(k in WORKLOAD_FIELDS for k in doc):  # one workload (an unknown field among them is parse_workload's)
        return parse_workload(name or "workload", doc)
    if name is None and len(doc) > 1:
        raise WorkloadFlagError(f"{len(doc)} workloads ({', '.join(doc)}): choose one with --workload-name")
    if name is not None and name not in doc:
        raise WorkloadFlagError(f"--workload-name {name!r}: not in the map; its workloads: {', '.join(doc)}")
    picked = name if name is not None else next(iter(doc))
    return parse_workload(picked, doc[picked])


def workload_points(w: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The SweepPoint fields of each point of workload ``w``: its own arrival (closed loop at each of its stream
    counts, one point for a rate, a trace or a ramp), or the command line's --concurrency / --request-rate, the
    workload's arrival then replaced by the one that ran (its sweep point records that). Raises
    WorkloadFlagError for a combination that cannot run."""
    import dataclasses

    from pipeline.workloads import Arrival

    a, where = w.arrival, f"workloads.{w.name}.arrival"
    if a.kind in ("trace", "ramp"):
        flag = "--concurrency" if args.concurrency else "--request-rate" if args.request_rate else None
        if flag:
            raise WorkloadFlagError(f"{where}: a {a.kind} sets its own schedule; drop {flag}")
        if a.kind == "trace" and (args.num_prompts or args.duration):
            raise WorkloadFlagError(
                f"{where}: a trace replays its own requests; drop --num-prompts/--duration "
                "(arrival.limit keeps the first N)"
            )
        return [{"workload": w, "num_prompts": args.num_prompts, "duration_s": args.duration or a.duration_s}]
    open_s = args.duration or (a.duration_s if a.kind in ("poisson", "gamma") else None)
    if args.concurrency or (a.kind == "closed" and not args.request_rate):
        streams = args.concurrency or list(a.concurrency)
        if not streams:
            raise WorkloadFlagError(
                f"{where}.concurrency: a closed loop needs its stream counts: give them there or --concurrency"
            )
        if args.concurrency and tuple(args.concurrency) != a.concurrency:
            w = dataclasses.replace(w, arrival=Arrival("closed", concurrency=tuple(args.concurrency)))
        kinds, duration = [{"concurrency": c} for c in streams], args.duration
    elif args.request_rate:
        kind = "poisson" if args.burstiness == 1.0 else "gamma"
        kinds = [
            {
                "request_rate": r,
                "burstiness": args.burstiness,
                "workload": dataclasses.replace(
                    w, arrival=Arrival(kind, rate=r, burstiness=args.burstiness, duration_s=open_s)
                ),
            }
            for r in args.request_rate
        ]
        duration = open_s
    else:  # poisson / gamma at the workload's own rate (--duration: its duration_s)
        if open_s != a.duration_s:
            w = dataclasses.replace(w, arrival=dataclasses.replace(a, duration_s=open_s))
        kinds, duration = [{"request_rate": a.rate, "burstiness": a.burstiness}], open_s
    if args.num_prompts is None and "concurrency" in kinds[0]:
        raise WorkloadFlagError(f"{where}: a closed loop's requests are drawn ahead: give --num-prompts")
    if args.num_prompts is None and duration is None:
        raise WorkloadFlagError(f"{where}: give --num-prompts or --duration (or the arrival's duration_s)")
    chat = {"endpoint": "chat"} if w.turns is not None else {}  # a session is a conversation: the chat endpoint
    return [{"workload": w, "num_prompts": args.num_prompts, "duration_s": duration, **chat, **k} for k in kinds]


def workload_problem(args: argparse.Namespace) -> tuple[Any, list[dict[str, Any]], str | None]:
    """(workload, its points' fields, None) or (None, [], the one line saying why it cannot run)."""
    from agents.loadgen.datasets import DatasetError
    from agents.loadgen.traces import TraceError
    from agents.loadgen.workload import preflight
    from pipeline.workloads import WorkloadError

    try:
        w = load_workload(args.workload, args.workload_name)
        points = workload_points(w, args)
        preflight([w])  # the trace and the prompt file read before anything is sent
    except (WorkloadFlagError, WorkloadError, DatasetError, TraceError) as exc:
        return None, [], f"--workload: {exc}"
    return w, points, None


def served_max_model_len(models: dict[str, Any] | None, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a ``GET /v1/models`` answer (vLLM lists it), else None."""
    entries = (models or {}).get("data") or []
    value = next((m.get("max_model_len") for m in entries if isinstance(m, dict) and m.get("id") == model), None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 2 else None


def plan_errors() -> tuple[type[Exception], ...]:
    from agents.loadgen.datasets import DatasetError
    from agents.loadgen.prompts import PromptLengthError
    from agents.loadgen.traces import TraceError
    from pipeline.workloads import WorkloadError

    return DatasetError, PromptLengthError, TraceError, WorkloadError


def workload_sweep(
    w: Any,
    kw: list[dict[str, Any]],
    base: dict[str, Any],
    models: dict[str, Any] | None,
    args: argparse.Namespace,
    probe: Any,
) -> tuple[list[Any], str | None]:
    """The points of a ``--workload`` run (filed under the spec's nominal lengths, its draws clipped to the
    server's ``max_model_len`` when /v1/models lists it), or a line saying why the workload cannot run there."""
    from agents.loadgen.point import SweepPoint
    from pipeline.workloads import describe, fit_problems

    if models is None and args.server_kind != "auto":
        try:  # --server-kind and --model given: /v1/models only for max_model_len, which may stay unknown
            models = probe(args.base_url)
        except Exception:  # noqa: BLE001 - a server without /v1/models runs with max_model_len unknown
            models = None
    max_model_len = served_max_model_len(models, base["model"])
    if max_model_len is not None:
        problems = fit_problems(w, base["model"], max_model_len)  # the endpoint: workload_points
        if problems:
            return [], f"--workload: {problems[0]}"
    print(f"workload {w.name}: {describe(w)}" + (f" (max_model_len {max_model_len})" if max_model_len else ""))
    common = {
        **base,
        "input_len": w.input.nominal,
        "output_len": w.output.nominal,
        "prompt_source": w.prompts.source,
        "sharegpt_path": None,
        "max_model_len": max_model_len,
        "note": f"workload {w.name}: {describe(w)}",
    }
    return [SweepPoint(**{**common, **k}) for k in kw], None
