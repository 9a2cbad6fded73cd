"""The preflight gate's checks on a CUDA box: the GPUs, the driver, CUDA, the vLLM venv and its pin, nvidia-smi.

Where the lanes' server is the neuronpipe server (``NEURONPIPE_CUDA_SERVER=neuronpipe``), the vLLM venv and pin
checks give way to ``torch.cuda``: the harness interpreter's torch, its CUDA build, and the GPUs it can use.

They run where the box role is ``cuda`` or the backend is cuda (:func:`agents.preflight.cuda_expected`), in place
of the Neuron checks (NeuronCores, neuronx-cc, stale compile locks), beside the backend-neutral ones (cache, hub,
dataset, clock). Each is a ``preflight_checks`` row like the Neuron ones. Everything is read from nvidia-smi on the
lanes' PATH and the venv's dist-info files, so a fake nvidia-smi and a fake venv tree exercise them for real: an
absent nvidia-smi, output it cannot parse and a timeout each fail ``gpu.visible`` with one reason (the driver and
CUDA checks then skip, naming it), never a crash.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agents.preflight_results import CheckResult, PreflightInputs, fail, ok, pin_checks, skip
from agents.telemetry.nvidia import (
    Gpu,
    NvidiaSmiOutputError,
    inventory_command,
    parse_cuda_version,
    parse_gpu_inventory,
    version_tuple,
)
from agents.venvs import distributions
from pipeline.box_stack import (
    CUDA_MIN_DRIVER,
    CUDA_MIN_VERSION,
    CUDA_SERVING_INSTALLS,
    CUDA_VENV,
    REQUIRED_CLIS,
    pins_for,
)
from pipeline.instance_types import CATALOGUE
from pipeline.servers import cuda_server

INSTANCE_TYPE_ENV = "NEURONPIPE_INSTANCE_TYPE"
VLLM_PYTHON_ENV = "NEURONPIPE_VLLM_PYTHON"  # agents.serving.cuda's override of the interpreter vLLM runs under
BOOT_LOG = "/var/log/neuronpipe-boot.log"


def cuda_steps(inputs: PreflightInputs) -> list:
    """The checks for the server the lanes will boot (:func:`pipeline.servers.cuda_server` of their environment)."""
    if cuda_server(inputs.lane_env.env) == "neuronpipe":
        return [check_torch_cuda, check_cuda_clis, check_gpus]
    return [check_cuda_venv, check_cuda_pins, check_cuda_clis, check_gpus]


# ---- the neuronpipe server's torch ---------------------------------------------------------------------------
_TORCH_PROBE = (
    "import json, torch; ok = torch.cuda.is_available(); "
    "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'available': ok, "
    "'names': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if ok else []}))"
)


def check_torch_cuda(inputs: PreflightInputs) -> list[CheckResult]:
    """The neuronpipe server runs in the harness interpreter: its torch must be a CUDA build that sees a GPU."""
    shown = f"{sys.executable} -c 'import torch; torch.cuda.is_available()'"
    try:
        proc = inputs.run(
            [sys.executable, "-c", _TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=inputs.timeout_s,
            env=inputs.lane_env.env,
        )
    except subprocess.TimeoutExpired:
        return [fail("torch.cuda", f"{shown} did not answer within {inputs.timeout_s:g} s (a hung driver?)")]
    except OSError as exc:
        return [fail("torch.cuda", f"{shown} could not be run: {exc}")]
    try:
        found = json.loads((proc.stdout or "").strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (ValueError, IndexError):
        found = None
    if not isinstance(found, dict):
        said = " ".join(((proc.stderr or "") + " " + (proc.stdout or "")).split())[-300:] or "nothing"
        return [
            fail(
                "torch.cuda",
                f"{shown} exited {proc.returncode}: {said} (the neuronpipe server needs torch in "
                "the harness interpreter)",
                expected="a CUDA build of torch",
            )
        ]
    observed = f"torch {found.get('torch')}, CUDA {found.get('cuda') or 'none'}"
    if not found.get("available"):
        why = (
            "a CPU build of torch"
            if not found.get("cuda")
            else "a CUDA build that sees no GPU (driver too old for it, or no device: see gpu.visible)"
        )
        return [
            fail(
                "torch.cuda",
                f"{observed}: {why}; the neuronpipe server cannot use the GPU",
                observed=observed,
                expected="torch.cuda.is_available()",
            )
        ]
    return [ok("torch.cuda", f"{observed}: {', '.join(found.get('names') or [])}", "torch.cuda.is_available()")]


# ---- the venv vLLM runs from --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServingVenv:
    path: Path | None
    source: str  # which setting named it


def serving_venv(inputs: PreflightInputs) -> ServingVenv:
    """The venv :class:`agents.serving.cuda.CudaLauncher` starts vLLM from: ``$NEURONPIPE_VLLM_PYTHON``'s, else the
    box's venv (``$NEURONPIPE_DLAMI_VENV``, the CUDA venv on a GPU box), else — off a box only — the harness's own
    interpreter (what ``accelerator_python()`` falls back to)."""
    python = (inputs.lane_env.env.get(VLLM_PYTHON_ENV) or "").strip()
    if python:
        return ServingVenv(Path(python).parent.parent, f"${VLLM_PYTHON_ENV}")
    if inputs.lane_env.venv is not None:
        return ServingVenv(inputs.lane_env.venv, "$NEURONPIPE_DLAMI_VENV")
    if inputs.box_role != "cuda":
        return ServingVenv(Path(sys.prefix), "the harness interpreter (no NEURONPIPE_DLAMI_VENV off a box)")
    return ServingVenv(None, "nothing")


def check_cuda_venv(inputs: PreflightInputs) -> list[CheckResult]:
    venv = serving_venv(inputs)
    if venv.path is None:
        return [
            fail(
                "venv.vllm",
                f"NEURONPIPE_DLAMI_VENV is not set: a GPU box's bootstrap names its CUDA venv "
                f"({CUDA_VENV}) there; see {BOOT_LOG}",
                expected=CUDA_VENV,
            )
        ]
    if not (venv.path / "bin" / "python").exists():
        return [
            fail(
                "venv.vllm",
                f"{venv.path}/bin/python does not exist: the CUDA venv named by {venv.source} "
                f"was not created (the bootstrap's vLLM install failed? see {BOOT_LOG})",
                observed=venv.path,
                expected=CUDA_VENV,
            )
        ]
    return [ok("venv.vllm", venv.path)]


def check_cuda_pins(inputs: PreflightInputs) -> list[CheckResult]:
    venv = serving_venv(inputs).path
    if venv is None or not (venv / "bin" / "python").exists():
        return [skip("pins", "no CUDA venv to read versions from (see venv.vllm)")]

    def not_installed(pkg: str, pin: str) -> str:
        exact = CUDA_SERVING_INSTALLS.get(pkg, pin)
        return (
            f"{pkg} is not installed in {venv}; the lanes need {pkg} {pin}.* (the box's bootstrap installs "
            f"{pkg}=={exact}: see {BOOT_LOG}, or install it: {venv}/bin/python -m pip install {pkg}=={exact})"
        )

    return pin_checks(
        distributions(venv),
        pins_for("cuda"),
        missing=not_installed,
        mismatched=lambda pkg, have, pin: (
            f"{pkg} {have} in {venv}, the plan is pinned to {pin}: not the vLLM the lanes were written for; reinstall "
            "the pinned one or change the pins deliberately (pipeline/box_stack.py)"
        ),
    )


def check_cuda_clis(inputs: PreflightInputs) -> list[CheckResult]:
    path = inputs.lane_env.env.get("PATH", "")
    out = []
    for cli in REQUIRED_CLIS["cuda"]:
        found = shutil.which(cli, path=path)
        if found:
            out.append(ok(f"path.{cli}", found))
        else:
            out.append(
                fail(
                    f"path.{cli}",
                    f"{cli} is not on the PATH the lanes get ({path}): it comes with the "
                    "NVIDIA driver (/usr/bin on the GPU DLAMI); without it the lanes have no "
                    "GPU telemetry and the backend is not detected",
                    expected="on PATH",
                )
            )
    return out


# ---- the GPUs, the driver, CUDA -----------------------------------------------------------------------------
def _nvidia_smi(inputs: PreflightInputs, exe: str, args: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, why it gave nothing usable)."""
    cmd = [exe, *args]
    shown = " ".join(["nvidia-smi", *args])
    try:
        proc = inputs.run(cmd, capture_output=True, text=True, timeout=inputs.timeout_s, env=inputs.lane_env.env)
    except subprocess.TimeoutExpired:
        return None, (
            f"{shown} did not answer within {inputs.timeout_s:g} s (a hung driver: check dmesg for Xid "
            "errors; the box may need a reboot)"
        )
    except OSError as exc:
        return None, f"{shown} could not be run: {exc}"
    if proc.returncode != 0:
        said = " ".join(((proc.stderr or "") + " " + (proc.stdout or "")).split())[:300] or "nothing"
        return None, (
            f"{shown} exited {proc.returncode}: {said} (is the NVIDIA driver loaded? a kernel update "
            "without the driver's DKMS module leaves no device)"
        )
    return proc.stdout or "", None


def at_least(version: str, floor: str) -> bool:
    """``12`` >= ``12.0`` and ``570.86.15`` >= ``535``: numeric, missing parts count as 0."""
    have, need = version_tuple(version), version_tuple(floor)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def _names(gpus: list[Gpu]) -> str:
    counts: dict[str, int] = {}
    for g in gpus:
        counts[g.name] = counts.get(g.name, 0) + 1
    return ", ".join(f"{n} × {name}" if n > 1 else name for name, n in counts.items())


def check_gpus(inputs: PreflightInputs) -> list[CheckResult]:
    exe = shutil.which("nvidia-smi", path=inputs.lane_env.env.get("PATH", ""))
    after = "no GPU inventory (see gpu.visible)"
    if exe is None:
        return [
            fail(
                "gpu.visible",
                "nvidia-smi is not on the lanes' PATH: cannot see the GPUs (is this the GPU "
                "DLAMI? the NVIDIA driver ships nvidia-smi)",
                expected=">= 1 GPU",
            ),
            skip("gpu.driver", after),
            skip("gpu.cuda", after),
        ]
    text, why = _nvidia_smi(inputs, exe, inventory_command("nvidia-smi")[1:])
    gpus: list[Gpu] = []
    if why is None:
        try:
            gpus = parse_gpu_inventory(text or "")
        except NvidiaSmiOutputError as exc:
            why = f"nvidia-smi --query-gpu output not understood: {exc}"
    if why is not None:
        return [fail("gpu.visible", why, expected=">= 1 GPU"), skip("gpu.driver", after), skip("gpu.cuda", after)]
    if not gpus:
        return [
            visible(inputs, gpus),
            skip("gpu.driver", "no GPU listed (see gpu.visible)"),
            skip("gpu.cuda", "no GPU listed (see gpu.visible)"),
        ]
    return [visible(inputs, gpus), driver(gpus), cuda(inputs, exe)]


def visible(inputs: PreflightInputs, gpus: list[Gpu]) -> CheckResult:
    itype = (inputs.lane_env.env.get(INSTANCE_TYPE_ENV) or "").strip()
    entry = CATALOGUE.get(itype)
    observed = f"{len(gpus)} GPU(s): {_names(gpus)}" if gpus else "0 GPU(s)"
    if not gpus:
        return fail(
            "gpu.visible",
            "nvidia-smi lists no GPU (the driver is loaded but sees no device: a GPU-less "
            "instance type, or a device lost to an Xid error; check dmesg)",
            observed=observed,
            expected=">= 1 GPU",
        )
    if entry is None:
        where = f"{itype} is not catalogued" if itype else f"${INSTANCE_TYPE_ENV} is not set"
        return ok("gpu.visible", observed, f">= 1 GPU ({where}: no expected count)")
    if entry.backend != "cuda":
        return fail(
            "gpu.visible",
            f"{INSTANCE_TYPE_ENV}={itype} is a {entry.family} type, not a GPU one, yet the "
            "gate runs the CUDA checks: the box role or backend is wrong for this instance",
            observed=observed,
            expected="a cuda instance type",
        )
    if len(gpus) != entry.accelerators:
        return fail(
            "gpu.visible",
            f"nvidia-smi lists {len(gpus)} GPU(s), a {itype} has {entry.accelerators} "
            f"{entry.accelerator}: a GPU the driver lost (check dmesg for Xid errors) or the "
            "wrong instance type recorded",
            observed=observed,
            expected=f"{entry.accelerators} GPU(s) ({itype})",
        )
    return ok("gpu.visible", observed, f"{entry.accelerators} GPU(s) ({itype})")


def driver(gpus: list[Gpu]) -> CheckResult:
    versions = sorted({g.driver_version for g in gpus}, key=version_tuple)
    oldest = versions[0]
    expected = f">= {CUDA_MIN_DRIVER}"
    if not at_least(oldest, CUDA_MIN_DRIVER):
        return fail(
            "gpu.driver",
            f"NVIDIA driver {oldest} is older than the {CUDA_MIN_DRIVER} branch, the oldest "
            "vLLM's CUDA 12 wheels run on (pipeline/box_stack.py CUDA_MIN_DRIVER): use the GPU "
            "DLAMI the stack resolves, or update the driver",
            observed=oldest,
            expected=expected,
        )
    return ok("gpu.driver", oldest, expected)


def cuda(inputs: PreflightInputs, exe: str) -> CheckResult:
    """The CUDA version the driver supports, from nvidia-smi's header (no --query-gpu field reports it)."""
    text, why = _nvidia_smi(inputs, exe, [])
    expected = f">= {CUDA_MIN_VERSION}"
    if why is not None:
        return fail("gpu.cuda", why, expected=expected)
    found = parse_cuda_version(text or "")
    if found is None:
        return fail(
            "gpu.cuda",
            "nvidia-smi's header shows no CUDA Version (a driver without CUDA support, or "
            "output this gate does not understand: it looks for 'CUDA Version: 12.8')",
            expected=expected,
        )
    if not at_least(found, CUDA_MIN_VERSION):
        return fail(
            "gpu.cuda",
            f"the driver supports CUDA {found}, vLLM's wheels need CUDA {CUDA_MIN_VERSION} or "
            "newer (pipeline/box_stack.py CUDA_MIN_VERSION): update the driver",
            observed=found,
            expected=expected,
        )
    return ok("gpu.cuda", found, expected)
