"""The preflight gate on a fake GPU box: a CUDA venv tree with vLLM's dist-info, and an nvidia-smi on the lanes' PATH
that prints what the real one prints (the ``--query-gpu`` CSV, the plain table's header). A healthy box passes; a
wrong GPU count, an old driver, a missing vLLM pin, an absent, garbled or hung nvidia-smi each fail one check with
its reason; no Neuron check runs on a CUDA box."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agents.box_env import build_lane_environment
from agents.preflight import PreflightInputs, run_checks
from pipeline.box_stack import CUDA_MIN_DRIVER, CUDA_SERVING_INSTALLS, CUDA_SERVING_PINS

# `nvidia-smi` on a g5.xlarge (driver 570, the GPU DLAMI), trimmed after the first GPU's rows.
HEADER_570 = """\
Tue Jul  1 12:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A10G                    On  |   00000000:00:1E.0 Off |                    0 |
|  0%   27C    P8              9W /  300W |       1MiB /  23028MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""
# The same on an older box (driver 470, CUDA 11.4): the pre-535 layout.
HEADER_470 = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.182.03   Driver Version: 470.182.03   CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
"""
DRIVER_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running.\n"
)


def query_csv(n: int, name: str = "NVIDIA A10G", driver: str = "570.86.15", mem: int = 23028) -> str:
    """``nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader,nounits``."""
    return "".join(f"{i}, {name}, {driver}, {mem}\n" for i in range(n))


def fake_gpu_box(
    root: Path,
    *,
    query: str | None = None,
    header: str = HEADER_570,
    rc: int = 0,
    vllm: str | None = CUDA_SERVING_INSTALLS["vllm"],
    nvidia_smi: bool = True,
) -> Path:
    """A CUDA venv under ``root`` (its bin/python this interpreter, vLLM's dist-info at ``vllm``), and a directory
    with a fake nvidia-smi; returns that directory (for PATH)."""
    venv = root / "opt" / "neuronpipe-vllm-cuda"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    if vllm is not None:
        d = site / f"vllm-{vllm}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {vllm}\n")
    bin_dir = root / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    if nvidia_smi:
        (root / "query.txt").write_text(DRIVER_FAILED if rc else query_csv(1) if query is None else query)
        (root / "header.txt").write_text(header if rc == 0 else DRIVER_FAILED)
        script = bin_dir / "nvidia-smi"
        script.write_text(
            "#!/bin/sh\n"
            f'case "$1" in --query-gpu=*) cat "{root}/query.txt";; *) cat "{root}/header.txt";; esac\n'
            f"exit {rc}\n"
        )
        script.chmod(0o755)
    return bin_dir


def inputs(tmp_path: Path, instance_type: str | None = "g5.xlarge", box_role: str = "cuda", **box) -> PreflightInputs:
    bin_dir = fake_gpu_box(tmp_path / "box", **box)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "NEURONPIPE_DLAMI_VENV": str(tmp_path / "box/opt/neuronpipe-vllm-cuda"),
        "NEURONPIPE_CACHE": str(tmp_path / "cache"),
    }
    if instance_type:
        env["NEURONPIPE_INSTANCE_TYPE"] = instance_type
    return PreflightInputs(
        box_role=box_role,
        backend="cuda",
        lane_env=build_lane_environment("preflight", base=env),
        models=[],
        dataset=None,
        cache_free_gib=0.0,
        max_clock_skew_s=60.0,
        timeout_s=10.0,
    )


def checks(inp: PreflightInputs):
    return {r.check: r for r in run_checks(inp)}


def test_a_healthy_gpu_box_passes_with_the_cuda_checks_and_no_neuron_ones(tmp_path):
    results = run_checks(inputs(tmp_path))
    assert [(r.check, r.reason) for r in results if r.status == "fail"] == []
    by = {r.check: r for r in results}
    assert by["gpu.visible"].observed == "1 GPU(s): NVIDIA A10G"
    assert by["gpu.visible"].expected == "1 GPU(s) (g5.xlarge)"
    assert by["gpu.driver"].observed == "570.86.15" and by["gpu.driver"].expected == f">= {CUDA_MIN_DRIVER}"
    assert by["gpu.cuda"].observed == "12.8"
    assert by["venv.vllm"].observed.endswith("opt/neuronpipe-vllm-cuda")
    assert by["pins.vllm"].observed == CUDA_SERVING_INSTALLS["vllm"]
    assert by["pins.vllm"].expected == CUDA_SERVING_PINS["vllm"]
    assert by["path.nvidia-smi"].observed.endswith("/usr/bin/nvidia-smi")
    assert {"cache.writable", "cache.free_space", "hf.token", "dataset", "clock", "backend"} <= set(by)
    neuron = {
        "neuron-cores",
        "cache.stale_locks",
        "path.neuronx-cc",
        "path.neuron-ls",
        "path.libneuronpjrt-path",
        "pins.neuronx-cc",
        "pins.torch-neuronx",
        "venv.vllm.no-optimum-neuron",
    }
    assert neuron.isdisjoint(by)
    assert by["cache.writable"].observed == str(tmp_path / "cache" / "vllm")  # vLLM's cache, not neuronx-cc's
    # rows exactly like the Neuron ones
    row = by["gpu.visible"].row("cuda")
    assert set(row) == {"box_role", "check", "status", "observed", "expected", "reason", "duration_s", "ts"}


def test_multi_gpu_type_counts_its_gpus(tmp_path):
    by = checks(inputs(tmp_path, "p5.48xlarge", query=query_csv(8, "NVIDIA H100 80GB HBM3", mem=81559)))
    assert by["gpu.visible"].status == "pass" and by["gpu.visible"].observed == "8 GPU(s): 8 × NVIDIA H100 80GB HBM3"


def test_a_wrong_gpu_count_fails_naming_both(tmp_path):
    r = checks(inputs(tmp_path, "g5.12xlarge", query=query_csv(3)))["gpu.visible"]
    assert r.status == "fail" and r.observed == "3 GPU(s): 3 × NVIDIA A10G" and r.expected == "4 GPU(s) (g5.12xlarge)"
    assert "nvidia-smi lists 3 GPU(s), a g5.12xlarge has 4 A10G" in r.reason


def test_an_uncatalogued_instance_type_needs_one_gpu_and_says_so(tmp_path):
    r = checks(inputs(tmp_path, "g4dn.xlarge", query=query_csv(1, "Tesla T4")))["gpu.visible"]
    assert r.status == "pass" and "g4dn.xlarge is not catalogued" in r.expected
    r = checks(inputs(tmp_path / "b", None))["gpu.visible"]
    assert r.status == "pass" and "NEURONPIPE_INSTANCE_TYPE is not set" in r.expected


def test_no_gpu_listed_fails(tmp_path):
    by = checks(inputs(tmp_path, query=""))
    r = by["gpu.visible"]
    assert r.status == "fail" and r.observed == "0 GPU(s)" and "lists no GPU" in r.reason
    assert by["gpu.driver"].status == "skip" and by["gpu.cuda"].status == "skip"


def test_an_old_driver_fails_with_the_floor(tmp_path):
    by = checks(inputs(tmp_path, query=query_csv(1, driver="470.182.03"), header=HEADER_470))
    r = by["gpu.driver"]
    assert r.status == "fail" and r.observed == "470.182.03" and r.expected == f">= {CUDA_MIN_DRIVER}"
    assert f"older than the {CUDA_MIN_DRIVER} branch" in r.reason and "CUDA_MIN_DRIVER" in r.reason
    c = by["gpu.cuda"]
    assert c.status == "fail" and c.observed == "11.4" and "CUDA 12.0 or newer" in c.reason


def test_a_missing_vllm_fails_its_pin_with_the_install_line(tmp_path):
    inp = inputs(tmp_path, vllm=None)
    r = checks(inp)["pins.vllm"]
    venv = inp.lane_env.venv
    assert r.status == "fail" and r.observed is None and r.expected == CUDA_SERVING_PINS["vllm"]
    assert f"{venv}/bin/python -m pip install vllm=={CUDA_SERVING_INSTALLS['vllm']}" in r.reason
    assert "/var/log/neuronpipe-boot.log" in r.reason


def test_a_vllm_at_another_version_fails_its_pin(tmp_path):
    r = checks(inputs(tmp_path, vllm="0.16.0"))["pins.vllm"]
    assert r.status == "fail" and r.observed == "0.16.0" and "pipeline/box_stack.py" in r.reason


def test_no_cuda_venv_fails_the_venv_check_and_skips_the_pins(tmp_path):
    inp = inputs(tmp_path)
    env = dict(inp.lane_env.env)
    env.pop("NEURONPIPE_DLAMI_VENV")
    env.pop("VIRTUAL_ENV", None)
    inp.lane_env = build_lane_environment("preflight", base=env)
    by = checks(inp)
    assert by["venv.vllm"].status == "fail" and "NEURONPIPE_DLAMI_VENV is not set" in by["venv.vllm"].reason
    assert "/opt/neuronpipe-vllm-cuda" in by["venv.vllm"].reason and by["pins"].status == "skip"


def test_an_absent_nvidia_smi_fails_once_per_check_it_owns_never_crashes(tmp_path):
    by = checks(inputs(tmp_path, nvidia_smi=False))
    assert by["path.nvidia-smi"].status == "fail" and "NVIDIA driver" in by["path.nvidia-smi"].reason
    assert by["gpu.visible"].status == "fail" and "nvidia-smi is not on the lanes' PATH" in by["gpu.visible"].reason
    assert by["gpu.driver"].status == "skip" and by["gpu.cuda"].status == "skip"
    assert "gpu.visible" in by["gpu.driver"].reason


def test_a_driver_that_does_not_answer_is_the_reason(tmp_path):
    r = checks(inputs(tmp_path, rc=9))["gpu.visible"]
    assert r.status == "fail" and "exited 9" in r.reason and "couldn't communicate with the NVIDIA driver" in r.reason


def test_unparsable_inventory_is_one_failed_check(tmp_path):
    by = checks(inputs(tmp_path, query="Failed to initialize NVML: Driver/library version mismatch\n"))
    r = by["gpu.visible"]
    assert r.status == "fail" and "not understood" in r.reason and "Driver/library version mismatch" in r.reason
    assert by["gpu.driver"].status == "skip"


def test_a_hung_nvidia_smi_times_out_into_a_failed_check(tmp_path):
    inp = inputs(tmp_path)

    def hung(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw.get("timeout"))

    inp.run = hung
    by = checks(inp)
    assert by["gpu.visible"].status == "fail" and "did not answer within 10 s" in by["gpu.visible"].reason
    assert by["gpu.cuda"].status == "skip"


def test_a_header_without_a_cuda_version_is_null_with_a_reason(tmp_path):
    r = checks(inputs(tmp_path, header="| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: N/A |\n"))[
        "gpu.cuda"
    ]
    assert r.status == "fail" and r.observed is None and "shows no CUDA Version" in r.reason


def test_a_neuron_instance_type_on_a_cuda_box_fails(tmp_path):
    r = checks(inputs(tmp_path, "inf2.xlarge"))["gpu.visible"]
    assert r.status == "fail" and "neuron-inf2 type" in r.reason


def test_backend_cuda_on_a_local_box_runs_the_cuda_checks_against_the_harness_venv_when_none_is_named(tmp_path):
    inp = inputs(tmp_path, box_role="local")
    env = dict(inp.lane_env.env)
    env.pop("NEURONPIPE_DLAMI_VENV")
    env.pop("VIRTUAL_ENV", None)
    inp.lane_env = build_lane_environment("preflight", base=env)
    by = checks(inp)
    assert by["gpu.visible"].status == "pass" and "neuron-cores" not in by
    assert by["venv.vllm"].observed == sys.prefix


@pytest.mark.parametrize("role", ["inf2", "trn1"])
def test_the_neuron_boxes_get_no_gpu_checks(tmp_path, role):
    from rehearsal.dlami import build_dlami

    venv = build_dlami(tmp_path / "box", role, "inf2.xlarge" if role == "inf2" else "trn1.2xlarge")
    env = {"PATH": "/usr/bin:/bin", "NEURONPIPE_DLAMI_VENV": str(venv), "NEURONPIPE_CACHE": str(tmp_path / "cache")}
    inp = PreflightInputs(
        box_role=role,
        backend="neuron",
        lane_env=build_lane_environment("preflight", base=env),
        models=[],
        dataset=None,
        cache_free_gib=0.0,
        max_clock_skew_s=60.0,
    )
    by = checks(inp)
    assert not any(c.startswith("gpu.") for c in by) and "path.nvidia-smi" not in by and "neuron-cores" in by


def test_the_lane_on_a_gpu_box_keeps_its_rows_and_fails_with_the_drivers_reason(tmp_path, monkeypatch):
    from agents.runner import LaneRequest, run_lane
    from analytics.store import open_store

    bin_dir = fake_gpu_box(tmp_path / "box", query=query_csv(1, driver="470.182.03"), header=HEADER_470)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(tmp_path / "box/opt/neuronpipe-vllm-cuda"))
    monkeypatch.setenv("NEURONPIPE_BOX_ROLE", "cuda")
    monkeypatch.setenv("NEURONPIPE_INSTANCE_TYPE", "g5.xlarge")
    monkeypatch.setenv("NEURONPIPE_CACHE", str(tmp_path / "cache"))
    store = open_store(tmp_path / "results")
    result = run_lane(LaneRequest(lane="preflight", run_id="r1", backend="cuda", telemetry_interval_s=0.05), store)
    assert result.status == "failed" and "gpu.driver" in result.error_message
    rows = store.read_table("preflight_checks", ["r1"]).to_pylist()
    assert sorted(r["check"] for r in rows if r["status"] == "fail") == ["gpu.cuda", "gpu.driver"]
    assert {r["box_role"] for r in rows} == {"cuda"} and not any(r["check"] == "neuron-cores" for r in rows)


# ---- the neuronpipe server on the GPU (NEURONPIPE_CUDA_SERVER=neuronpipe) ------------------------------------
def neuronpipe_inputs(
    tmp_path: Path, run=subprocess.run, instance_type: str | None = "g5.xlarge", **box
) -> PreflightInputs:
    inp = inputs(tmp_path, instance_type, **box)
    env = {**inp.lane_env.env, "NEURONPIPE_CUDA_SERVER": "neuronpipe"}
    return PreflightInputs(
        box_role="cuda",
        backend="cuda",
        lane_env=build_lane_environment("preflight", base=env),
        models=[],
        dataset=None,
        cache_free_gib=0.0,
        max_clock_skew_s=60.0,
        timeout_s=30.0,
        run=run,
    )


def torch_answers(stdout: str, rc: int = 0):
    """A runner whose ``python -c`` torch probe prints ``stdout``; nvidia-smi still runs for real (the fake one)."""

    def run(cmd, **kw):
        if cmd[0] == sys.executable:
            return subprocess.CompletedProcess(
                cmd, rc, stdout, "Traceback ...\nModuleNotFoundError: torch" if rc else ""
            )
        return subprocess.run(cmd, **kw)

    return run


def test_the_neuronpipe_server_checks_torch_cuda_instead_of_the_vllm_venv(tmp_path):
    """With what a real H200 machine printed (tests/fixtures/nvidia_smi) and its torch's answer."""
    real = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"
    probe = '{"torch": "2.11.0+cu130", "cuda": "13.0", "available": true, "names": ["NVIDIA H200"]}\n'
    by = checks(
        neuronpipe_inputs(
            tmp_path,
            run=torch_answers(probe),
            vllm=None,
            instance_type=None,
            query=(real / "h200-inventory.csv").read_text(),
            header=(real / "h200-header.txt").read_text(),
        )
    )
    assert [(c, r.reason) for c, r in by.items() if r.status == "fail"] == []
    assert by["torch.cuda"].observed == "torch 2.11.0+cu130, CUDA 13.0: NVIDIA H200"
    assert "venv.vllm" not in by and "pins.vllm" not in by  # no vLLM is needed for this server
    assert by["gpu.visible"].observed == "1 GPU(s): NVIDIA H200"
    assert (by["gpu.driver"].observed, by["gpu.cuda"].observed) == ("580.159.04", "13.0")


def test_a_cpu_build_of_torch_fails_the_neuronpipe_servers_check(tmp_path):
    """The harness interpreter here is a CPU build of torch: asked for real, it fails with that reason."""
    by = checks(neuronpipe_inputs(tmp_path))
    assert by["torch.cuda"].status == "fail"
    assert by["torch.cuda"].reason.startswith("torch 2.13.0") and "a CPU build of torch" in by["torch.cuda"].reason


def test_a_cuda_torch_that_sees_no_gpu_and_a_missing_torch_fail_with_their_reasons(tmp_path):
    blind = '{"torch": "2.11.0+cu130", "cuda": "13.0", "available": false, "names": []}'
    by = checks(neuronpipe_inputs(tmp_path / "a", run=torch_answers(blind)))
    assert by["torch.cuda"].status == "fail" and "a CUDA build that sees no GPU" in by["torch.cuda"].reason
    by = checks(neuronpipe_inputs(tmp_path / "b", run=torch_answers("", rc=1)))
    assert by["torch.cuda"].status == "fail" and "ModuleNotFoundError: torch" in by["torch.cuda"].reason
