"""One training-limit probe in a process of its own: a short LoRA SFT run of one model at one sequence length.

The ``train_limits`` lane runs ``python -m agents.training.probe --request FILE --result FILE`` once per probe, so
an out-of-memory kills the probe, not the lane. The request is a :class:`TrainRequest` as JSON plus the backend and,
on the CPU, ``memory_cap_mib``: once the libraries are imported and the model has been loaded once, the process's
address space may grow by that much (``RLIMIT_AS``), so the trainer's own load, the LoRA wrap, the optimizer and
the activations (which grow with the sequence length) all count against it: a device's memory, played by the CPU.
The trainer is the sft lane's (:func:`agents.training.backends.get_trainer`): on neuron it runs the same torchrun
command, its log beside the probe's (the request's ``log_dir``), so the compiler's verbatim error is there too.

The result file says whether the run finished its steps and its tokens/s; a failed run prints its traceback (every
cause's verbatim line). :func:`launch` is the lane's side: it starts the probe, waits for it (``wait4``: the peak
resident memory of that process alone), kills it past its timeout, and classifies a failure from the log
(:func:`classify_probe_log`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import psutil

from agents.training.backends import TrainRequest, get_trainer
from pipeline.quick_exit import skip_final_collection
from pipeline.steps import summarize

_PATHS = ("model_dir", "output_dir", "log_dir")
# A CPU probe's allocators, bounded so that the address space it grows by is the training's, not arenas reserved
# per thread or a memory pool's reservation (glibc's arenas, pyarrow's mimalloc)
CPU_ENV = {"MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system", "TOKENIZERS_PARALLELISM": "false"}
NCC_LINE = re.compile(r"\[?NCC_[A-Z]+\d+\]?")  # a Neuron compiler error code ([NCC_EOOM002] ...)
RSS_SOURCE = "cpu: the probe process's peak RSS (wait4 ru_maxrss)"


def request_json(req: TrainRequest, backend: str, memory_cap_mib: float | None) -> dict[str, Any]:
    body = {
        k: (str(v) if k in _PATHS and v is not None else list(v) if isinstance(v, tuple) else v)
        for k, v in asdict(req).items()
    }
    return {"backend": backend, "memory_cap_mib": memory_cap_mib, "request": body}


def parse_request(doc: dict[str, Any]) -> tuple[TrainRequest, str, float | None]:
    body = dict(doc["request"])
    known = {f.name for f in fields(TrainRequest)}
    for k in _PATHS:
        if body.get(k) is not None:
            body[k] = Path(body[k])
    body["lora_targets"] = tuple(body.get("lora_targets") or ())
    return TrainRequest(**{k: v for k, v in body.items() if k in known}), doc["backend"], doc.get("memory_cap_mib")


def cap_growth(req: TrainRequest, cap_mib: float) -> int:
    """Import the trainer's libraries, load the model once, then cap the address space at what the process maps
    now plus ``cap_mib``; returns the limit in bytes."""
    import resource

    import datasets  # noqa: F401 - imported before the cap: libraries are not the device's memory
    import peft  # noqa: F401 - imported to learn whether it is installed
    import trl  # noqa: F401 - imported to learn whether it is installed
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(req.model_dir)  # dropped at once: its pages stay mapped for the trainer's
    limit = psutil.Process().memory_info().vms + int(cap_mib * 2**20)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    return limit


def run_probe(req: TrainRequest, backend: str, memory_cap_mib: float | None) -> dict[str, Any]:
    """Train ``req`` for its steps; the result document (never raises for a failed run)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"ok": False, "tokens_per_s": None, "steps": 0, "cap_bytes": None}
    try:
        if memory_cap_mib is not None and backend == "cpu":
            out["cap_bytes"] = cap_growth(req, memory_cap_mib)
        outcome = get_trainer(backend)(req, lambda done, total: None)
    except Exception:  # noqa: BLE001 - the probe's outcome (MemoryError included), written for the lane
        traceback.print_exc()  # the causes' verbatim lines (on neuron: the log's tail) for the classifier
    else:
        summary = summarize(outcome.steps)
        out.update(ok=True, tokens_per_s=summary.tokens_per_s, steps=summary.steps)
    out["wall_s"] = time.perf_counter() - t0
    return out


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    error_kind: str | None  # oom | compile_error | timeout | exited | ... (agents.serving.failures)
    error: str | None  # the verbatim line
    wall_s: float
    tokens_per_s: float | None
    peak_rss_bytes: int | None  # the probe process's peak resident memory (its children's are not in it)


def classify_probe_log(lines: list[str], returncode: int | None) -> tuple[str, str]:
    """(kind, verbatim line) of a failed probe: a Neuron compiler error code's line first (``NCC_EOOM002``, the
    compiler's out-of-device-memory, is a compile error, its code kept), else the boot classifier's signatures
    (out of memory, ``MemoryError``, ``Cannot allocate memory``: oom)."""
    from agents.serving.failures import classify_log

    for line in lines:
        if NCC_LINE.search(line):
            return "compile_error", line.strip()
    failure = classify_log(lines, exited=True, returncode=returncode)
    return failure.kind.value, failure.line


def launch(
    req: TrainRequest,
    backend: str,
    memory_cap_mib: float | None,
    probe_dir: Path,
    timeout_s: float,
    tick: Callable[[], None] = lambda: None,
) -> ProbeResult:
    """Run one probe as ``python -m agents.training.probe`` in a session of its own, its output in
    ``probe_dir/probe.log`` (the neuron trainer's log beside it); wait for it, calling ``tick`` meanwhile; a probe
    past ``timeout_s`` is killed with its process group (kind ``timeout``)."""
    probe_dir.mkdir(parents=True, exist_ok=True)
    request, result, log_path = probe_dir / "request.json", probe_dir / "result.json", probe_dir / "probe.log"
    request.write_text(json.dumps(request_json(req, backend, memory_cap_mib)))
    result.unlink(missing_ok=True)
    env = {**os.environ, **(CPU_ENV if backend == "cpu" else {})}
    t0 = time.perf_counter()
    with open(log_path, "w") as log_fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agents.training.probe", "--request", str(request), "--result", str(result)],
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    timed_out, rss = False, None
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode, rss = os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024  # KiB on Linux
                break
            if time.perf_counter() - t0 > timeout_s:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
            tick()
            time.sleep(0.2)
    finally:
        if proc.returncode is None:  # interrupted: the probe and its children go with the lane
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.perf_counter() - t0
    doc = json.loads(result.read_text()) if result.exists() else {}
    if doc.get("ok") and proc.returncode == 0:
        return ProbeResult(True, None, None, wall, doc.get("tokens_per_s"), rss)
    if timed_out:
        return ProbeResult(False, "timeout", f"the probe did not finish within {timeout_s:g} s", wall, None, rss)
    lines = [
        ln
        for p in [log_path, *sorted(probe_dir.glob("neuron-*.log"))]
        for ln in p.read_text(errors="replace").splitlines()
    ]
    kind, line = classify_probe_log(lines, proc.returncode)
    if kind == "exited" and proc.returncode is not None and proc.returncode < 0:  # no signature: say what killed it
        line = f"the probe was killed by {signal.Signals(-proc.returncode).name} (last line: {line})"
    return ProbeResult(False, kind, line, wall, None, rss)


def main(argv: list[str] | None = None) -> int:
    skip_final_collection()
    parser = argparse.ArgumentParser(prog="python -m agents.training.probe")
    parser.add_argument("--request", required=True, help="the probe's request (JSON)")
    parser.add_argument("--result", required=True, help="where the result goes (JSON)")
    ns = parser.parse_args(argv)
    req, backend, cap = parse_request(json.loads(Path(ns.request).read_text()))
    result = run_probe(req, backend, cap)
    Path(ns.result).write_text(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
