"""The preflight gate's checks: every failure mode the predecessor paid for on a real box, checked in seconds.

Each check is one row (``preflight_checks``): ``pass``, ``fail`` with a verbatim, actionable reason, or ``skip``
with why it does not apply here. The checks look at the environment :mod:`agents.box_env` builds — the one the
training and serving processes get — so what passes here is what the lanes will see.

The CUDA checks (:mod:`agents.preflight_gpu`: GPUs, driver, CUDA, the vLLM venv and pin, nvidia-smi) run where the
box role is ``cuda`` or the backend is cuda, and no Neuron check runs there. Otherwise the Neuron checks run where
the box names a DLAMI venv (``NEURONPIPE_DLAMI_VENV``) or the backend is neuron. Everything either reads is files,
the lanes' PATH and CLI output, so fake DLAMI trees and fake CLIs exercise them for real (tests, the rehearsal's
boxes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from agents.box_env import cache_root
from agents.preflight_results import CheckResult, PreflightInputs, fail, ok, pin_checks, skip
from agents.venvs import distributions
from pipeline.box_stack import FORBIDDEN_IN_SERVING, REQUIRED_CLIS, TRAINING_INSTALLS, pins_for

DEFAULT_HUB = "https://huggingface.co"
# Packages whose installed version an install into the training venv must never change.
PROTECTED_PREFIXES = ("torch", "neuronx", "libneuronxla", "jax", "numpy", "transformers")


def cuda_expected(inputs: PreflightInputs) -> bool:
    return inputs.box_role == "cuda" or inputs.backend == "cuda"


def neuron_expected(inputs: PreflightInputs) -> bool:
    """A GPU box names its CUDA venv in NEURONPIPE_DLAMI_VENV too: that is no Neuron box."""
    return not cuda_expected(inputs) and (inputs.lane_env.venv is not None or inputs.backend == "neuron")


def run_checks(inputs: PreflightInputs) -> list[CheckResult]:
    """Every check for this box, in a fixed order; each is timed; a check that raises is a failure, not a crash."""
    steps: list[Callable[[PreflightInputs], list[CheckResult]]] = [check_backend]
    if cuda_expected(inputs):
        from agents.preflight_gpu import cuda_steps

        steps += cuda_steps(inputs)
    elif neuron_expected(inputs):
        steps += [check_venv, check_pins, check_forbidden, check_clis, check_neuron_cores]
    steps += [check_cache, check_hub, check_dataset, check_clock]
    out: list[CheckResult] = []
    for step in steps:
        t0 = time.perf_counter()
        try:
            results = step(inputs)
        except Exception as exc:  # noqa: BLE001 - the gate reports a broken check as a failure with its cause
            results = [
                fail(step.__name__.removeprefix("check_"), f"the check itself failed: {type(exc).__name__}: {exc}")
            ]
        dt = (time.perf_counter() - t0) / max(1, len(results))
        for r in results:
            r.duration_s = dt
        out += results
    return out


# ---- the checks ---------------------------------------------------------------------------------------------
def check_backend(inputs: PreflightInputs) -> list[CheckResult]:
    return [ok("backend", inputs.backend)]


def _venv_check_name(role: str) -> str:
    return "venv.training" if role == "trn1" else "venv.vllm"


def check_venv(inputs: PreflightInputs) -> list[CheckResult]:
    venv = inputs.lane_env.venv
    name = _venv_check_name(inputs.box_role)
    if venv is None:
        return [
            fail(
                name,
                "NEURONPIPE_DLAMI_VENV is not set: the per-boot setup found no DLAMI venv (see "
                "/var/log/neuronpipe-boot.log); is this a Neuron DLAMI?",
                expected="a DLAMI venv",
            )
        ]
    if not (venv / "bin" / "python").exists():
        return [
            fail(
                name,
                f"{venv}/bin/python does not exist: the DLAMI venv named by NEURONPIPE_DLAMI_VENV is "
                "missing or broken (a different AMI than the one the stack pins?)",
                observed=venv,
            )
        ]
    return [ok(name, venv)]


def check_pins(inputs: PreflightInputs) -> list[CheckResult]:
    venv = inputs.lane_env.venv
    if venv is None or not (venv / "bin" / "python").exists():
        return [skip("pins", "no DLAMI venv to read versions from (see the venv check)")]
    installed = distributions(venv)
    out: list[CheckResult] = []
    if inputs.box_role == "trn1":
        missing = {p: v for p, v in TRAINING_INSTALLS.items() if p not in installed}
        if missing and inputs.install_missing:
            out.append(install_training_pins(inputs, venv, missing, installed))
            installed = distributions(venv)

    def not_installed(pkg: str, pin: str) -> str:
        how = (
            f"install it: {venv}/bin/python -m pip install {pkg}=={pin}"
            if pkg in TRAINING_INSTALLS
            else "this DLAMI is not the pinned one: use the AMI the stack pins"
        )
        return f"{pkg} is not installed in {venv}; the lanes need {pkg} {pin}.* ({how})"

    return out + pin_checks(
        installed,
        pins_for(inputs.box_role),
        missing=not_installed,
        mismatched=lambda pkg, have, pin: (
            f"{pkg} {have} in {venv}, the plan is pinned to {pin}: a different Neuron stack than "
            "the lanes were written for; pin the matching DLAMI or change the pins deliberately "
            "(pipeline/box_stack.py)"
        ),
    )


def install_training_pins(
    inputs: PreflightInputs, venv: Path, missing: Mapping[str, str], installed: Mapping[str, str]
) -> CheckResult:
    """pip-install the missing training packages at their pins, with the stack's own versions held fixed."""
    held = sorted(f"{n}=={v}" for n, v in installed.items() if n.startswith(PROTECTED_PREFIXES))
    constraints = Path(inputs.lane_env.compile_cache).parent / f".preflight-constraints-{uuid.uuid4().hex}.txt"
    constraints.parent.mkdir(parents=True, exist_ok=True)
    constraints.write_text("\n".join(held) + "\n")
    wanted = [f"{n}=={v}" for n, v in sorted(missing.items())]
    cmd = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "-q",
        "-c",
        str(constraints),
        *wanted,
    ]
    try:
        proc = inputs.run(
            cmd, capture_output=True, text=True, timeout=max(inputs.timeout_s, 600.0), env=inputs.lane_env.env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return fail("install.training", f"installing {' '.join(wanted)} into {venv} failed: {exc}")
    finally:
        constraints.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return fail(
            "install.training",
            f"pip install {' '.join(wanted)} into {venv} exited {proc.returncode}: " + " | ".join(tail),
            expected=" ".join(wanted),
        )
    return ok("install.training", f"installed {' '.join(wanted)} (held: {len(held)} stack packages)", " ".join(wanted))


def check_forbidden(inputs: PreflightInputs) -> list[CheckResult]:
    venv = inputs.lane_env.venv
    if inputs.box_role != "inf2" or venv is None or not venv.is_dir():
        return []
    installed = distributions(venv)
    out = []
    for pkg, why in sorted(FORBIDDEN_IN_SERVING.items()):
        check = f"venv.vllm.no-{pkg}"
        if pkg in installed:
            out.append(
                fail(
                    check,
                    f"{pkg} {installed[pkg]} is installed in the vLLM venv {venv}: {why}. Remove it: "
                    f"{venv}/bin/python -m pip uninstall -y {pkg}",
                    observed=installed[pkg],
                    expected="absent",
                )
            )
        else:
            out.append(ok(check, "absent", "absent"))
    return out


def check_clis(inputs: PreflightInputs) -> list[CheckResult]:
    path = inputs.lane_env.env.get("PATH", "")
    venv = inputs.lane_env.venv
    out = []
    for cli in REQUIRED_CLIS.get(inputs.box_role, ()):
        found = shutil.which(cli, path=path)
        if found:
            out.append(ok(f"path.{cli}", found))
        else:
            out.append(
                fail(
                    f"path.{cli}",
                    f"{cli} is not on the PATH the lanes get ({path}); it belongs in "
                    f"{venv}/bin or /opt/aws/neuron/bin — torch-neuronx shells out to "
                    "libneuronpjrt-path at import and every lane then fails with a "
                    "different-looking error",
                    expected="on PATH",
                )
            )
    return out


def check_neuron_cores(inputs: PreflightInputs, needed: int = 2) -> list[CheckResult]:
    path = inputs.lane_env.env.get("PATH", "")
    exe = shutil.which("neuron-ls", path=path)
    if exe is None:
        return [
            fail(
                "neuron-cores",
                "neuron-ls is not on the lanes' PATH: cannot see the NeuronCores",
                expected=f">= {needed} free",
            )
        ]
    try:
        proc = inputs.run(
            [exe, "--json-output"], capture_output=True, text=True, timeout=inputs.timeout_s, env=inputs.lane_env.env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [fail("neuron-cores", f"neuron-ls --json-output did not answer: {exc}")]
    if proc.returncode != 0:
        return [
            fail(
                "neuron-cores",
                f"neuron-ls --json-output exited {proc.returncode}: "
                f"{(proc.stderr or '').strip()[:300]} (is the Neuron driver loaded? "
                "modinfo neuron; a kernel update without the DKMS module leaves no device)",
            )
        ]
    try:
        devices = parse_neuron_ls(proc.stdout)
    except ValueError as exc:
        return [fail("neuron-cores", f"neuron-ls output not understood: {exc}")]
    cores = sum(d["cores"] for d in devices)
    busy = [
        f"device {d['device']}: pid {p.get('pid')} ({p.get('command') or '?'})" for d in devices for p in d["processes"]
    ]
    if cores < needed:
        return [
            fail(
                "neuron-cores",
                f"{cores} NeuronCore(s) visible, the lanes need {needed} (tensor parallel {needed})",
                observed=cores,
                expected=f">= {needed}",
            )
        ]
    if busy:
        return [
            fail(
                "neuron-cores",
                "NeuronCores in use by another process: "
                + "; ".join(busy)
                + " — a server or trainer left from an earlier lane or a hand-run job; stop it first",
                observed=f"{cores} cores, {len(busy)} process(es)",
                expected="free",
            )
        ]
    return [ok("neuron-cores", f"{cores} cores on {len(devices)} device(s), free", f">= {needed} free")]


def parse_neuron_ls(text: str) -> list[dict[str, Any]]:
    """``neuron-ls --json-output``: a list of devices with ``neuron_device``, ``nc_count`` (and
    ``neuroncore_count`` in some releases), ``neuron_processes``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if isinstance(data, dict):
        data = data.get("neuron_devices") or data.get("devices") or []
    if not isinstance(data, list):
        raise ValueError("expected a list of devices")
    out = []
    for d in data:
        if not isinstance(d, dict):
            raise ValueError("a device entry is not an object")
        cores = d.get("nc_count", d.get("neuroncore_count"))
        if not isinstance(cores, int):
            raise ValueError(f"device {d.get('neuron_device')}: no core count")
        procs = d.get("neuron_processes") or []
        out.append(
            {"device": d.get("neuron_device"), "cores": cores, "processes": [p for p in procs if isinstance(p, dict)]}
        )
    return out


def check_cache(inputs: PreflightInputs) -> list[CheckResult]:
    """The compile cache: neuronx-cc's (the one cache of :mod:`agents.box_env`), or on a CUDA box vLLM's under the
    cache volume (``VLLM_CACHE_ROOT`` of :mod:`agents.serving.cuda`), where no neuronx-cc leaves locks."""
    gpu = cuda_expected(inputs)
    cache = cache_root(inputs.lane_env.env) / "vllm" if gpu else Path(inputs.lane_env.compile_cache)
    holds = "vLLM's torch.compile cache, weights, checkpoints" if gpu else "NEFFs, NxDI artifacts, checkpoints"
    out = []
    try:
        cache.mkdir(parents=True, exist_ok=True)
        probe = cache / f".preflight-{uuid.uuid4().hex}"
        probe.write_bytes(b"ok")
        probe.unlink()
        out.append(ok("cache.writable", cache))
    except OSError as exc:
        return [
            fail(
                "cache.writable",
                f"the compile cache {cache} is not writable: {exc} (is the cache volume "
                "mounted? see /var/log/neuronpipe-boot.log)",
                observed=cache,
            )
        ]
    if not gpu:
        out.append(clear_stale_locks(cache))
    free = shutil.disk_usage(cache).free / 2**30
    need = inputs.cache_free_gib
    if free < need:
        out.append(
            fail(
                "cache.free_space",
                f"{free:.1f} GiB free under {cache}, the plan needs {need:g} GiB "
                f"({holds}): grow the cache volume "
                "(cdk.json) or clear old entries",
                observed=f"{free:.1f} GiB",
                expected=f">= {need:g} GiB",
            )
        )
    else:
        out.append(ok("cache.free_space", f"{free:.1f} GiB", f">= {need:g} GiB"))
    return out


def compiler_processes() -> list[str]:
    """``pid (command)`` of every running neuronx-cc (read from /proc; empty where there is no /proc)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(Path(a.decode(errors="replace")).name == "neuronx-cc" for a in argv[:2] if a):
            out.append(f"{d.name} ({b' '.join(argv[:3]).decode(errors='replace')})")
    return out


def clear_stale_locks(cache: Path, running: Callable[[], list[str]] = compiler_processes) -> CheckResult:
    """A compile killed mid-way leaves ``*.lock`` files, and the next compile of that module waits on them for
    ever ("Another process must be compiling MODULE_…": the predecessor lost 3 h). The gate runs before any
    compile on the box, so with no neuronx-cc running every lock is stale: removed, and counted."""
    locks = sorted(cache.rglob("*.lock"))
    if not locks:
        return ok("cache.stale_locks", "none")
    busy = running()
    if busy:
        return fail(
            "cache.stale_locks",
            f"{len(locks)} lock file(s) in {cache} and neuronx-cc is running: "
            + "; ".join(busy)
            + " — a compile outside this run; stop it or wait",
            observed=f"{len(locks)} lock(s)",
        )
    for lock in locks:
        lock.unlink(missing_ok=True)
    return ok(
        "cache.stale_locks",
        f"removed {len(locks)} stale lock(s): "
        + ", ".join(str(p.relative_to(cache)) for p in locks[:5])
        + (" …" if len(locks) > 5 else ""),
    )


def check_hub(inputs: PreflightInputs) -> list[CheckResult]:
    if not inputs.models:
        return [skip("hf.token", "no model of this run comes from the hub (tiny models are built on the box)")]
    if inputs.token is None:
        return [fail("hf.token", "no way to read the hub token configured")]
    try:
        token, source = inputs.token()
    except Exception as exc:  # noqa: BLE001 - its message is the actionable line (HubAccessError)
        return [fail("hf.token", str(exc), expected="a readable token")]
    out = [ok("hf.token", f"read from {source}")]
    endpoint = (inputs.lane_env.env.get("HF_ENDPOINT") or DEFAULT_HUB).rstrip("/")
    head = inputs.http_head or _http_head
    for name, repo, revision, gated in inputs.models:
        url = f"{endpoint}/{repo}/resolve/{revision or 'main'}/config.json"
        check = f"hf.licence.{name}"
        try:
            status, headers = head(url, {"Authorization": f"Bearer {token}"}, inputs.timeout_s)
        except Exception as exc:  # noqa: BLE001 - network errors are the reason
            out.append(
                fail(
                    check,
                    f"the hub did not answer a HEAD on {url}: {type(exc).__name__}: {exc} "
                    "(no route out? the NAT gateway, or HF_ENDPOINT)",
                )
            )
            continue
        date = headers.get("date") or headers.get("Date")
        if date:
            try:
                inputs.reference_dates.append(parsedate_to_datetime(date))
            except (TypeError, ValueError):
                pass
        if status in (200, 302, 307):
            out.append(ok(check, f"HTTP {status}", "HTTP 200"))
        elif status == 401:
            out.append(
                fail(
                    check,
                    f"the hub rejected the token ({source}) for {repo} (HTTP 401): the token is "
                    "invalid or expired; store a valid read token",
                    observed="HTTP 401",
                )
            )
        elif status == 403:
            out.append(
                fail(
                    check,
                    f"{repo} is gated and this token's account has not accepted its licence "
                    f"(HTTP 403): accept it at https://huggingface.co/{repo}, then re-run",
                    observed="HTTP 403",
                )
            )
        elif status == 404:
            out.append(
                fail(
                    check,
                    f"{repo} (revision {revision or 'main'}) has no config.json on the hub "
                    "(HTTP 404): a wrong repo id or revision in the catalogue"
                    + (" — or, for a gated repo, a token without access" if gated else ""),
                    observed="HTTP 404",
                )
            )
        else:
            out.append(fail(check, f"the hub answered HTTP {status} for {url}", observed=f"HTTP {status}"))
    return out


def _http_head(url: str, headers: dict[str, str], timeout: float) -> tuple[int, dict[str, str]]:
    import httpx

    r = httpx.head(url, headers=headers, timeout=timeout, follow_redirects=False)
    return r.status_code, dict(r.headers)


def check_dataset(inputs: PreflightInputs) -> list[CheckResult]:
    if inputs.box_role == "inf2":
        return [skip("dataset", "nothing trains on this box")]
    source = inputs.dataset
    if not source:
        from agents.training.data import BUNDLED_PATH as path

        return (
            [ok("dataset", f"bundled {path.name}")]
            if path.is_file()
            else [fail("dataset", f"the bundled dataset {path} is missing from the harness (a broken package)")]
        )
    if source.startswith("s3://"):
        bucket, _, key = source[5:].partition("/")
        client = inputs.s3_client
        if client is None:
            import boto3

            client = boto3.client("s3")
        try:
            head = client.head_object(Bucket=bucket, Key=key)
        except Exception as exc:  # noqa: BLE001 - botocore's error is the reason
            return [
                fail(
                    "dataset",
                    f"the dataset {source} cannot be read: {type(exc).__name__}: {exc} (does the "
                    "box role's grant cover it?)",
                )
            ]
        return [ok("dataset", f"{source} ({head.get('ContentLength')} bytes)")]
    p = Path(source).expanduser()
    if not p.is_file() or not os.access(p, os.R_OK):
        return [fail("dataset", f"the dataset {p} is not a readable file on this box")]
    return [ok("dataset", f"{p} ({p.stat().st_size} bytes)")]


def check_clock(inputs: PreflightInputs) -> list[CheckResult]:
    refs = list(inputs.reference_dates)
    if inputs.store_clock is not None:
        try:
            d = inputs.store_clock()
        except Exception:  # noqa: BLE001 - no reference is a skip, not a failure
            d = None
        if d is not None:
            refs.append(d)
    if not refs:
        return [skip("clock", "no reference clock here (a local store and no hub access)")]
    now = inputs.now()
    skew = max((abs((now - r).total_seconds()) for r in refs), default=0.0)
    limit = inputs.max_clock_skew_s
    if skew > limit + 1.0:  # an HTTP Date has 1 s resolution
        return [
            fail(
                "clock",
                f"this box's clock is {skew:.0f} s off the reference (HTTP Date): SigV4 refuses "
                "requests more than 5 minutes off and timestamps in the results would be wrong; "
                "check chrony (chronyc tracking)",
                observed=f"{skew:.0f} s",
                expected=f"<= {limit:g} s",
            )
        ]
    return [ok("clock", f"{skew:.0f} s off", f"<= {limit:g} s")]


def failure_summary(results: list[CheckResult]) -> str:
    failed = [r for r in results if r.status == "fail"]
    return f"preflight: {len(failed)} check(s) failed: " + "; ".join(f"{r.check}: {r.reason}" for r in failed)
