"""`neuronpipe loadgen`: measure an OpenAI-compatible server (docs/reference/metrics.md), optionally commit the rows."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def parse_goodput(text: str | None) -> dict[str, float] | None:
    """``ttft:500,tpot:50,e2el:2000`` (milliseconds) -> {"ttft_ms": 500.0, ...}."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, _, value = part.partition(":")
        name = name.strip().lower()
        if name not in ("ttft", "tpot", "e2el") or not value:
            raise argparse.ArgumentTypeError(f"--goodput {part!r}: expected ttft|tpot|e2el:MS")
        out[f"{name}_ms"] = float(value)
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("loadgen", help="streaming load against an OpenAI-compatible server (vLLM-comparable metrics)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--model", help="served model id (default: the first of GET /v1/models)")
    p.add_argument(
        "--tokenizer", help="tokenizer dir/file (default: the bundled tiny one; whitespace for the synthetic server)"
    )
    p.add_argument("--server-kind", default="auto", help="vllm | transformers | synthetic | openai | auto")
    p.add_argument("--endpoint", default="completions", choices=("completions", "chat"))
    p.add_argument("--input-len", type=int, help="input tokens per request (required unless --workload)")
    p.add_argument("--output-len", type=int, help="output tokens per request (required unless --workload)")
    p.add_argument(
        "--workload",
        metavar="SPEC",
        help="a production-shaped workload (pipeline.workloads): a JSON object, or a .json file holding "
        "one or a map {NAME: workload}; replaces --input-len/--output-len/--prompt-source, and its "
        "arrival decides the loop unless --concurrency or --request-rate is given",
    )
    p.add_argument(
        "--workload-name",
        metavar="NAME",
        help="--workload: the workload of the map to run (needed when it holds several); names a "
        "single workload (default 'workload')",
    )
    load = p.add_mutually_exclusive_group()  # one of them is required unless --workload (invalid_argument)
    load.add_argument("--concurrency", type=_ints, help="closed loop; a comma list sweeps (1,4,8)")
    load.add_argument("--request-rate", type=_floats, help="open loop requests/s; a comma list sweeps")
    load.add_argument(
        "--search",
        choices=("capacity",),
        help="capacity: the highest open-loop rate meeting --slo (ladder, then bisection; "
        "docs/explanation/decisions.md)",
    )
    p.add_argument("--slo", help="--search: NAME (pipeline.slo) or ttft_ms=..,tpot_ms=..[,percentile=99]")
    p.add_argument(
        "--attainment",
        type=float,
        default=0.99,
        help="--search: share of requests that must be good for a rate to pass",
    )
    p.add_argument(
        "--rate-min",
        type=float,
        help="--search: start rate R0 req/s (default: one stream's rate from a short closed-loop probe)",
    )
    p.add_argument("--rate-max", type=float, help="--search: the highest rate tried (default: no limit)")
    p.add_argument("--precision", type=float, default=0.1, help="--search: stop when (fail - pass) / pass <= this")
    p.add_argument("--point-duration", type=float, default=30.0, help="--search: seconds of arrivals per rate")
    p.add_argument("--max-search-s", type=float, help="--search: time budget of the whole search")
    p.add_argument(
        "--confirm-overload",
        type=float,
        default=0.05,
        help="--search: the overload (fraction above capacity) the long confirmation point at the answer must show; "
        "it lasts 4 x the point's median latency / this, at most --confirm-max-s (0: no confirmation)",
    )
    p.add_argument("--confirm-max-s", type=float, default=600.0, help="--search: the longest confirmation point (s)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson)")
    p.add_argument("--max-concurrency", type=int, help="open-loop cap on requests in flight")
    p.add_argument("--num-prompts", type=int, default=None, help="requests per point (required unless --duration)")
    p.add_argument("--duration", type=float, help="closed loop: send no request after S seconds")
    p.add_argument("--window-s", type=float, help="sustained mode: windows of S seconds (with --duration)")
    p.add_argument("--warmup-windows", type=int, default=1, help="sustained: leading windows left out")
    p.add_argument("--retention-k", type=int, default=3, help="sustained: windows compared for retention")
    p.add_argument("--goodput", type=parse_goodput, help="SLOs in ms, e.g. ttft:500,tpot:50")
    p.add_argument("--prompt-source", choices=("random", "instructions", "sharegpt"), help="default: random")
    p.add_argument("--sharegpt", help="ShareGPT-format JSON file (with --prompt-source sharegpt)")
    p.add_argument("--warmup", type=int, default=4, help="warm-up requests per point (excluded)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--client-lag-bound-ms", type=float, default=50.0)
    p.add_argument("--idle-timeout", type=float, default=60.0, help="seconds without a byte before a request fails")
    p.add_argument("--request-timeout", type=float, default=1800.0)
    p.add_argument(
        "--results",
        help="results root (directory or s3://): commit the run as lane 'loadgen' (its points, "
        "requests, the client host's telemetry and a lane_runs row)",
    )
    p.add_argument("--run-id", help="run id for --results (default: loadgen-<UTC time>)")
    p.add_argument("--save-vllm-json", help="write vllm bench serve --save-result fields (one file per point)")
    p.add_argument(
        "--save-detailed",
        action="store_true",
        help="with --save-vllm-json: per-request lists and p50/p90/p95 as vLLM's --save-detailed",
    )
    p.add_argument(
        "--burst-bound",
        type=float,
        default=2.0,
        help="decode tokens per network read above which a stream counts as coalesced (docs/reference/metrics.md)",
    )
    p.set_defaults(func=run)


def probe(base_url: str) -> dict[str, Any]:
    import httpx

    from agents.loadgen.adapters import model_entries
    from agents.loadgen.transport import Target

    resp = httpx.get(Target.from_url(base_url).url("/v1/models"), timeout=10.0)
    resp.raise_for_status()
    body = resp.json()
    model_entries(body)  # a list, or 'data' not a list: ServerResponseShapeError (one clear line)
    return body


SHOWN = (
    "completed",
    "failed",
    "duration",
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "request_goodput",
    "client_queue_p99_ms",
    "decode_tokens_per_read",
    "zero_itl_gap_fraction",
    "max_decode_burst_tokens",
    "coalesced",
    "burst_note",
    "valid",
    "invalid_reason",
    "first_error",
)


def invalid_argument(args: argparse.Namespace) -> str | None:
    """The first bad argument as one line, or None: checked before any request is sent or file written."""
    problem = _shape_problem(args) or _number_problem(args)
    if problem:
        return problem
    if getattr(args, "search", None):
        return search_problem(args)
    return _run_problem(args) or _output_problem(args)


def _shape_problem(args: argparse.Namespace) -> str | None:
    """The server's URL, and what shapes the requests: a workload, or lengths with a concurrency or a rate."""
    from urllib.parse import urlparse

    url = urlparse(args.base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        return f"--base-url {args.base_url!r}: expected http://HOST:PORT"
    if args.workload is not None:
        given = [
            f
            for f, v in (
                ("--input-len", args.input_len),
                ("--output-len", args.output_len),
                ("--prompt-source", args.prompt_source),
                ("--sharegpt", args.sharegpt),
            )
            if v is not None
        ]
        if given:
            return f"--workload sets each request's lengths and prompts: drop {' and '.join(given)}"
        if getattr(args, "search", None) or args.window_s:
            return f"--workload with {'--search' if getattr(args, 'search', None) else '--window-s'}: not supported"
    else:
        missing = [f for f, v in (("--input-len", args.input_len), ("--output-len", args.output_len)) if v is None]
        if missing:
            return f"the following arguments are required: {', '.join(missing)} (or give --workload)"
        if args.workload_name is not None:
            return "--workload-name goes with --workload"
        if args.concurrency is None and args.request_rate is None and not getattr(args, "search", None):
            return "one of the arguments --concurrency --request-rate --search is required (or give --workload)"
    return None


def _below(name: str, value: float | None, low: float, strict: bool = False) -> str | None:
    """``--name must be >= low`` (``>`` when ``strict``) for a value that is not, or not finite; None for none."""
    import math

    if value is None:
        return None
    if not math.isfinite(value) or value < low or (strict and value == low):
        return f"--{name} must be {'>' if strict else '>='} {low:g}, not {value:g}"
    return None


def _number_problem(args: argparse.Namespace) -> str | None:
    """The first number out of its range (lengths, counts, durations, rates, bounds, goodput SLOs)."""
    num = _below
    checks = [
        num("input-len", args.input_len, 1),
        num("output-len", args.output_len, 1),
        num("num-prompts", args.num_prompts, 1),
        num("duration", args.duration, 0, strict=True),
        num("window-s", args.window_s, 0, strict=True),
        num("warmup-windows", args.warmup_windows, 0),
        num("retention-k", args.retention_k, 1),
        num("warmup", args.warmup, 0),
        num("burstiness", args.burstiness, 0, strict=True),
        num("max-concurrency", args.max_concurrency, 1),
        num("idle-timeout", args.idle_timeout, 0, strict=True),
        num("request-timeout", args.request_timeout, 0, strict=True),
        num("client-lag-bound-ms", args.client_lag_bound_ms, 0),
        num("burst-bound", getattr(args, "burst_bound", None), 0, strict=True),
    ]
    if args.concurrency is not None:
        checks += [f"--concurrency {args.concurrency!r}: give one or more values" if not args.concurrency else None]
        checks += [num("concurrency", c, 1) for c in args.concurrency]
    if args.request_rate is not None:
        checks += [f"--request-rate {args.request_rate!r}: give one or more values" if not args.request_rate else None]
        checks += [num("request-rate", r, 0, strict=True) for r in args.request_rate]
    checks += [num(f"goodput {k}", v, 0, strict=True) for k, v in (args.goodput or {}).items()]
    return next((c for c in checks if c), None)


def _run_problem(args: argparse.Namespace) -> str | None:
    """How long the run goes, its run id, and the ShareGPT file it reads."""
    from analytics.store import validate_component

    if args.num_prompts is None and args.duration is None and args.workload is None:
        return "give --num-prompts or --duration"
    if args.window_s and (not args.duration or not args.concurrency):
        return "--window-s needs --concurrency and --duration"
    if args.run_id is not None:
        try:
            validate_component("run_id", args.run_id)
        except ValueError as exc:
            return f"--run-id: {exc}"
    if (args.prompt_source == "sharegpt") != bool(args.sharegpt):
        return "--prompt-source sharegpt and --sharegpt FILE go together"
    if args.sharegpt:
        problem = _unreadable_text(args.sharegpt)
        if problem:
            return f"--sharegpt {args.sharegpt}: {problem}"
    return None


def _output_problem(args: argparse.Namespace) -> str | None:
    """Where the results and the vLLM JSON go: a bucket named, a directory (results) or a file (the JSON) that can
    be written, outside every other store."""
    import os

    from analytics.store.locate import overlap_problem

    for flag, path in (("--results", args.results), ("--save-vllm-json", args.save_vllm_json)):
        if path is None or str(path).startswith("s3://"):
            if path is not None and not str(path)[5:].split("/")[0]:
                return f"{flag} {path!r} names no bucket"
            continue
        if not str(path).strip():
            return f"{flag} is empty"
        want_dir = flag == "--results"
        if os.path.exists(path) and os.path.isdir(path) != want_dir:
            return f"{flag} {path} is {'a file' if want_dir else 'a directory'}"
        probe = os.path.dirname(os.path.abspath(path)) if not os.path.exists(path) else os.path.abspath(path)
        while not os.path.exists(probe):
            probe = os.path.dirname(probe)
        if not os.path.isdir(probe):
            return f"{flag} {path}: {probe} is a file, not a directory"
        if not os.access(probe, os.W_OK):
            return f"{flag} {path}: {probe} is not writable"
        if problem := overlap_problem(path, flag, "store" if want_dir else "file", (args.results,)):
            return problem  # rule 16: nothing but a store's own commit protocol writes inside it
    return None


def capacity_spec(args: argparse.Namespace) -> Any:
    """The search spec from the flags (pipeline.capacity.CapacitySpec); raises CapacitySpecError / SloError."""
    from pipeline.capacity import CapacitySpec
    from pipeline.slo import SloError, parse_slo

    if not args.slo:
        raise SloError("--search capacity needs --slo NAME or ttft_ms=..,tpot_ms=..[,percentile=..]")
    slo = parse_slo(args.slo)
    return CapacitySpec(
        ttft_ms=slo.ttft_ms,
        tpot_ms=slo.tpot_ms,
        percentile=slo.percentile,
        slo_name=slo.name,
        attainment=args.attainment,
        rate_min=args.rate_min,
        rate_max=args.rate_max,
        precision=args.precision,
        point_duration_s=args.point_duration,
        max_search_s=args.max_search_s,
        output_len=max(args.output_len, 1),
        confirm_overload=args.confirm_overload or None,
        confirm_max_s=args.confirm_max_s,
    )


def search_problem(args: argparse.Namespace) -> str | None:
    from pipeline.capacity import CapacitySpecError
    from pipeline.slo import SloError

    if args.window_s or args.duration or args.num_prompts:
        return "--search sets each point's arrivals itself: drop --duration, --num-prompts and --window-s"
    try:
        capacity_spec(args)
    except (CapacitySpecError, SloError) as exc:
        return str(exc)
    return None


def _unreadable_text(path: str) -> str | None:
    """Why a text input file cannot be used (missing, a directory, not UTF-8), or None."""
    import codecs

    try:
        decoder = codecs.getincrementaldecoder("utf-8")()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except IsADirectoryError:
        return "is a directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start} of a block: {exc.reason})"
    return None


def run(args: argparse.Namespace) -> int:
    from control_plane.commands.loadgen_workload import plan_errors, workload_problem, workload_sweep

    problem = invalid_argument(args)
    workload, workload_kw = None, []
    if not problem and args.workload is not None:
        workload, workload_kw, problem = workload_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from agents.loadgen.adapters import ServerResponseShapeError, UnconfirmedExtensionError, confirm_auto_kind
    from agents.loadgen.client import Timeouts
    from agents.loadgen.point import SweepPoint
    from agents.loadgen.prompts import load_tokenizer

    if args.num_prompts is None and args.duration is None and not args.search and workload is None:
        print("error: give --num-prompts or --duration", file=sys.stderr)
        return 2
    kind, model, models = args.server_kind, args.model, None
    output_len = args.output_len if workload is None else workload.output.nominal
    if kind == "auto" or not model:
        try:
            models = probe(args.base_url)
        except Exception as exc:  # noqa: BLE001 - any failure to reach the server ends the command
            print(f"error: cannot list models at {args.base_url}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        try:
            kind = confirm_auto_kind(models, output_len) if kind == "auto" else kind
        except (UnconfirmedExtensionError, ServerResponseShapeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        model = model or (models.get("data") or [{}])[0].get("id")
        if not model:
            print("error: the server lists no model; pass --model", file=sys.stderr)
            return 2
    tokenizer = load_tokenizer(args.tokenizer, kind)
    base = dict(
        base_url=args.base_url,
        model=model,
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        endpoint=args.endpoint,
        server_kind=kind,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        duration_s=args.duration,
        slo=args.goodput,
        prompt_source=args.prompt_source or "random",
        sharegpt_path=args.sharegpt,
        warmup_requests=args.warmup,
        seed=args.seed,
        client_lag_bound_ms=args.client_lag_bound_ms,
        burst_bound=args.burst_bound,
        timeouts=Timeouts(args.idle_timeout, args.request_timeout),
    )
    from agents.loadgen.run_record import HostTelemetry

    telemetry = HostTelemetry() if args.results else None  # the run's telemetry, as a lane's sampler takes it
    try:
        if args.search:
            return run_search(args, SweepPoint(concurrency=1, **base), tokenizer, telemetry)
        if workload is not None:
            points, problem = workload_sweep(workload, workload_kw, base, models, args, probe)
            if problem:
                print(f"error: {problem}", file=sys.stderr)
                return 2
        else:
            points = (
                [SweepPoint(concurrency=c, **base) for c in args.concurrency]
                if args.concurrency
                else [SweepPoint(request_rate=r, **base) for r in args.request_rate]
            )
        return run_points(args, points, kind, tokenizer, plan_errors() if workload is not None else (), telemetry)
    finally:
        if telemetry is not None:
            telemetry.rows()  # stopped, whatever ended the command


def run_points(
    args: argparse.Namespace, points: list[Any], kind: str, tokenizer: Any, plan_errors: Any, telemetry: Any
) -> int:
    """Each point measured and printed; with ``--results`` the run committed (points, requests, telemetry and
    its lane_runs row)."""
    from agents.loadgen.point import run_point
    from agents.loadgen.vllm_json import point_file, save_vllm_json

    hook = telemetry.phase_hook if telemetry is not None else None
    results, windows = [], []
    for i, point in enumerate(points):
        if args.window_s:
            from agents.loadgen.sustained import run_sustained

            if not args.duration or not args.concurrency:
                print("error: --window-s needs --concurrency and --duration", file=sys.stderr)
                return 2
            s = run_sustained(
                point, args.duration, args.window_s, args.warmup_windows, args.retention_k, tokenizer=tokenizer
            )
            result = s.point
            windows += s.windows
            print(
                f"sustained {result.point_id}: "
                + ", ".join(f"{k}={v}" for k, v in s.summary.items() if k not in ("run_id", "lane", "point_id"))
            )
        else:
            try:
                result = run_point(point, tokenizer, phase_hook=hook)
            except plan_errors as exc:  # raised while planning the point, before any request is sent
                print(f"error: --workload: {exc}", file=sys.stderr)
                return 2
        results.append(result)
        print(f"point {result.point_id} ({kind}, {args.endpoint}):")
        for key in SHOWN:
            value = result.metrics.get(key)
            print(f"  {key:<22} {value:.3f}" if isinstance(value, float) else f"  {key:<22} {value}")
        if args.save_vllm_json:
            path = save_vllm_json(
                result, point_file(args.save_vllm_json, i, len(points)), tokenizer.name, detailed=args.save_detailed
            )
            print(f"  vllm json              {path}")
    none_ok = [r.point_id for r in results if not r.metrics.get("completed")]
    failure = f"no request succeeded in point(s) {', '.join(none_ok)}" if none_ok else None
    if telemetry is not None:
        from analytics.store import open_store

        run_id = args.run_id or "loadgen-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        writer = open_store(args.results).begin_attempt(run_id, "loadgen")
        for r in results:
            writer.add_rows("requests", r.requests)
            writer.add_rows("sweep_points", [r.sweep_point])
        if windows:
            writer.add_rows("sustained_windows", windows)
        model = points[0].model if points else None
        status = telemetry.commit(
            writer, args, model, [r.point_id for r in results], "NoRequestSucceeded" if none_ok else None, failure
        )
        print(f"committed run {run_id} lane loadgen attempt {writer.attempt} ({status}) to {args.results}")
    if failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    return 0


def run_search(args: argparse.Namespace, template: Any, tokenizer: Any, telemetry: Any) -> int:
    """``--search capacity``: run the search, print each point and the bracket, commit points as they come."""
    from agents.loadgen.capacity import run_capacity_search

    spec = capacity_spec(args)
    writer = None
    run_id = args.run_id or "loadgen-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if telemetry is not None:
        from analytics.store import open_store

        writer = open_store(args.results).begin_attempt(run_id, "loadgen")

    staged: list[str] = []

    def on_point(result: Any, _verdict: Any) -> None:
        if writer is not None:
            writer.add_rows("requests", result.requests)
            writer.add_rows("sweep_points", [result.sweep_point])
            staged.append(result.point_id)

    search = {"search": "capacity", "slo": spec.slo_name}
    try:
        result = run_capacity_search(
            template,
            spec,
            tokenizer,
            on_point=on_point,
            log=lambda line: print(line),
            phase_hook=telemetry.phase_hook if telemetry is not None else None,
        )
    except KeyboardInterrupt:  # SIGINT/SIGTERM/SIGHUP (control_plane.cli): the points measured so far stand
        if writer is not None and staged:
            telemetry.commit(writer, args, template.model, staged, "Interrupted", "the search was interrupted", search)
            print(
                f"interrupted: {len(staged)} points committed as run {run_id} lane loadgen attempt "
                f"{writer.attempt} (failed) to {args.results}",
                file=sys.stderr,
            )
        raise
    print(f"search: {len(result.points)} points in {result.wall_s:.1f} s; {result.stop_reason}")
    print(f"  max_rate_meeting_slo    {result.max_rate_meeting_slo}")
    print(f"  lowest_rate_missing_slo {result.lowest_rate_missing_slo}")
    if writer is not None:
        status = telemetry.commit(
            writer,
            args,
            template.model,
            staged,
            None if result.found else "NoRateMeetsSlo",
            None if result.found else f"no rate meets the SLO: {result.stop_reason}",
            search,
        )
        print(f"committed run {run_id} lane loadgen attempt {writer.attempt} ({status}) to {args.results}")
    if not result.found:
        print(f"error: no rate meets the SLO: {result.stop_reason}", file=sys.stderr)
        return 1
    return 0
