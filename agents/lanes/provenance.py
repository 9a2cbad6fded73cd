"""provenance: what machine and stack this run used, recorded before anything is measured (rule 2).

Python, OS, kernel, CPU, memory; versions of every relevant package (Neuron,
CUDA, ML, AWS); `neuron-ls` / `nvidia-smi` output when present; instance
id/type/AMI from IMDSv2 when on EC2 (fast timeout elsewhere); the harness's git
commit; on a box, the SHA-256 of each box script the last harness sync installed (``box_script`` rows).
A fact that cannot be read is a row with value NULL and a note.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import platform
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from agents.runner import harness_sha
from pipeline.lane_configs.provenance import Config
from pipeline.servers import CPU_SERVER_ENV, CUDA_SERVER_ENV, serving_server

PACKAGES = (
    # Neuron
    "torch-neuronx",
    "neuronx-cc",
    "neuronx-distributed",
    "neuronx-distributed-inference",
    "optimum-neuron",
    "libneuronxla",
    "torch-xla",
    "aws-neuronx-runtime-discovery",
    # CUDA / serving
    "vllm",
    "vllm-neuron",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "triton",
    "xformers",
    "flash-attn",
    # ML
    "torch",
    "transformers",
    "tokenizers",
    "peft",
    "trl",
    "accelerate",
    "datasets",
    "safetensors",
    "optimum",
    "numpy",
    "huggingface-hub",
    # results / AWS
    "pyarrow",
    "duckdb",
    "boto3",
    "botocore",
    "aws-lambda-powertools",
    "httpx",
    "aiohttp",
    "uvloop",
    "neuron-pipelines",
)

DEVICE_COMMANDS = (
    ("neuron", "neuron-ls", ["neuron-ls", "--json-output"]),
    ("neuron", "neuronx-cc", ["neuronx-cc", "--version"]),
    ("driver", "neuron-driver", ["modinfo", "-F", "version", "neuron"]),
    ("cuda", "nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]),
    ("cuda", "nvcc", ["nvcc", "--version"]),
)

IMDS = "http://169.254.169.254"
IMDS_FIELDS = ("instance-id", "instance-type", "ami-id", "placement/region", "placement/availability-zone")


def _row(category: str, name: str, value: Any, source: str, note: str | None = None) -> dict[str, Any]:
    return {
        "category": category,
        "name": name,
        "value": None if value is None else str(value),
        "source": source,
        "note": note,
    }


def system_rows() -> list[dict[str, Any]]:
    uname = platform.uname()
    rows = [
        _row("python", "version", sys.version.split()[0], "sys.version"),
        _row("python", "implementation", platform.python_implementation(), "platform"),
        _row("python", "executable", sys.executable, "sys.executable"),
        _row("os", "system", uname.system, "platform.uname"),
        _row("os", "kernel", uname.release, "platform.uname"),
        _row("os", "machine", uname.machine, "platform.uname"),
        _row("cpu", "logical_cores", os.cpu_count(), "os.cpu_count"),
    ]
    try:
        rows.append(_row("cpu", "affinity_cores", len(os.sched_getaffinity(0)), "os.sched_getaffinity"))
    except AttributeError:
        rows.append(_row("cpu", "affinity_cores", None, "os.sched_getaffinity", "not available on this OS"))
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rows.append(_row("cpu", "model", model, "/proc/cpuinfo", None if model else "not readable"))
    try:
        import psutil

        rows.append(_row("memory", "total_mib", round(psutil.virtual_memory().total / 2**20), "psutil"))
        rows.append(_row("memory", "swap_mib", round(psutil.swap_memory().total / 2**20), "psutil"))
    except Exception as exc:  # noqa: BLE001 - a sensor that cannot read is recorded NULL with its error
        rows.append(_row("memory", "total_mib", None, "psutil", str(exc)))
    try:
        os_release = dict(
            line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line
        )
        rows.append(_row("os", "distribution", os_release.get("PRETTY_NAME", "").strip('"'), "/etc/os-release"))
    except OSError:
        rows.append(_row("os", "distribution", None, "/etc/os-release", "not readable"))
    return rows


def package_rows(extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rows = []
    for name in PACKAGES + tuple(extra):
        try:
            rows.append(_row("package", name, md.version(name), "importlib.metadata"))
        except md.PackageNotFoundError:
            rows.append(_row("package", name, None, "importlib.metadata", "not installed"))
    return rows


def command_rows(timeout_s: float) -> list[dict[str, Any]]:
    rows = []
    for category, name, cmd in DEVICE_COMMANDS:
        if shutil.which(cmd[0]) is None:
            rows.append(_row(category, name, None, " ".join(cmd), f"{cmd[0]} not found on PATH"))
            continue
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            text = (out.stdout or out.stderr).strip()
            note = None if out.returncode == 0 else f"exit {out.returncode}"
            rows.append(_row(category, name, text[:20000], " ".join(cmd), note))
        except (OSError, subprocess.TimeoutExpired) as exc:
            rows.append(_row(category, name, None, " ".join(cmd), f"{type(exc).__name__}: {exc}"))
    return rows


EC2_MARKERS = (
    ("/sys/class/dmi/id/sys_vendor", "Amazon EC2"),
    ("/sys/class/dmi/id/board_vendor", "Amazon EC2"),
    ("/sys/hypervisor/uuid", "ec2"),
    ("/sys/class/dmi/id/product_uuid", "EC2"),
)


def ec2_evidence(markers: tuple[tuple[str, str], ...] = EC2_MARKERS) -> str | None:
    """Which local file says this is an EC2 instance (no network), or None."""
    for path, needle in markers:
        try:
            text = Path(path).read_text(errors="replace").strip()
        except OSError:
            continue
        if text.lower().startswith(needle.lower()):
            return path
    return None


def imds_rows(timeout_s: float, base: str = IMDS) -> list[dict[str, Any]]:
    """Instance facts through IMDSv2 (token first). Off EC2 every field is NULL with the reason."""
    try:
        req = urllib.request.Request(
            f"{base}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            token = resp.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        note = f"IMDSv2 unreachable ({type(exc).__name__}): not on EC2"
        return [_row("instance", f, None, "IMDSv2", note) for f in IMDS_FIELDS]
    rows = []
    for f in IMDS_FIELDS:
        try:
            req = urllib.request.Request(f"{base}/latest/meta-data/{f}", headers={"X-aws-ec2-metadata-token": token})
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                rows.append(_row("instance", f, resp.read().decode(), "IMDSv2"))
        except (urllib.error.URLError, OSError) as exc:
            rows.append(_row("instance", f, None, "IMDSv2", f"{type(exc).__name__}: {exc}"))
    return rows


BOX_SCRIPTS_MANIFEST_ENV = "NEURONPIPE_BOX_SCRIPTS_MANIFEST"  # set by neuronpipe-sync in harness.env


def box_script_rows(environ: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One ``box_script`` row per script the box's last sync installed (infra/user_data: per-boot setup,
    neuronpipe-sync, the agent and CLI wrappers): its SHA-256 as the file is now, noted when it differs from
    what the installer recorded. Off a box (no manifest named): one NULL row saying so."""
    env = os.environ if environ is None else environ
    manifest = env.get(BOX_SCRIPTS_MANIFEST_ENV)
    if not manifest:
        return [_row("box_script", "manifest", None, BOX_SCRIPTS_MANIFEST_ENV, "not a box synced by neuronpipe-sync")]
    try:
        lines = Path(manifest).read_text().splitlines()
    except OSError as exc:
        return [_row("box_script", "manifest", None, manifest, f"{type(exc).__name__}: {exc}")]
    root = env.get("NEURONPIPE_BOX_ROOT", "")
    rows = []
    for line in lines:
        recorded, _, path = line.strip().partition("  ")
        if not path:
            continue
        try:
            now = hashlib.sha256(Path(root + path).read_bytes()).hexdigest()
        except OSError as exc:
            rows.append(_row("box_script", path, None, manifest, f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(
            _row(
                "box_script",
                path,
                now,
                manifest,
                None if now == recorded else f"differs from the installed {recorded} (changed since sync)",
            )
        )
    return rows


def run(ctx: LaneContext, config: Config) -> None:
    rows = system_rows()
    ctx.progress("provenance", 1, 4, "groups")
    rows += package_rows(config.extra_packages)
    ctx.progress("provenance", 2, 4, "groups")
    rows += command_rows(config.command_timeout_s)
    ctx.progress("provenance", 3, 4, "groups")
    if config.query_imds == "always" or (config.query_imds == "auto" and ec2_evidence()):
        rows += imds_rows(config.imds_timeout_s)
    else:  # off EC2 the link-local metadata address is not ours to probe
        note = "not on EC2: no EC2 DMI/hypervisor marker on this machine, IMDS not queried"
        rows += [_row("instance", f, None, "IMDSv2", note) for f in IMDS_FIELDS]
    sha = harness_sha()
    rows.append(
        _row(
            "harness",
            "git_sha",
            sha,
            "git rev-parse HEAD / NEURONPIPE_HARNESS_SHA",
            None if sha else "not a git checkout and NEURONPIPE_HARNESS_SHA unset",
        )
    )
    rows.append(_row("harness", "backend", ctx.backend, "agents.backend.detect_backend"))
    rows.append(_row("harness", "box_role", ctx.box_role, "NEURONPIPE_BOX_ROLE"))
    # which server the serving lanes boot: their figures measure it, not only the hardware
    rows.append(
        _row(
            "harness",
            "server",
            serving_server(ctx.backend, os.environ),
            f"{CPU_SERVER_ENV} / {CUDA_SERVER_ENV} (pipeline.servers.serving_server)",
        )
    )
    rows += box_script_rows()
    ctx.write("provenance", rows)
    ctx.progress("provenance", 4, 4, "groups")
