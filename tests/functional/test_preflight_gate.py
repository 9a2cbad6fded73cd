"""The preflight gate on fake DLAMI trees (real files, fake CLIs printing what the real ones print), a fake hub on
loopback, and through the lane runner: each known failure mode fails its check with an actionable reason."""

from __future__ import annotations

import subprocess
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.box_env import build_lane_environment
from agents.preflight import PreflightInputs, parse_neuron_ls, run_checks
from analytics.store import open_store
from pipeline.box_stack import TRAINING_INSTALLS
from rehearsal.dlami import Breakage, build_dlami, neuron_ls_json

NOTHING_BROKEN = Breakage()


def _inputs(tmp_path: Path, role: str, breakage: Breakage = NOTHING_BROKEN, **kw) -> PreflightInputs:
    venv = build_dlami(tmp_path / "box", role, "inf2.xlarge" if role == "inf2" else "trn1.2xlarge", breakage)
    env = {"PATH": "/usr/bin:/bin", "NEURONPIPE_DLAMI_VENV": str(venv), "NEURONPIPE_CACHE": str(tmp_path / "cache")}
    values = dict(
        box_role=role,
        backend="neuron",
        lane_env=build_lane_environment("preflight", base=env),
        models=[],
        dataset=None,
        cache_free_gib=0.0,
        max_clock_skew_s=60.0,
        timeout_s=10.0,
    )
    values.update(kw)
    return PreflightInputs(**values)


def _by_check(results):
    return {r.check: r for r in results}


@pytest.mark.parametrize("role", ["inf2", "trn1"])
def test_a_healthy_fake_dlami_passes_every_check_that_applies(tmp_path, role):
    results = run_checks(_inputs(tmp_path, role))
    failed = [(r.check, r.reason) for r in results if r.status == "fail"]
    assert failed == []
    checks = _by_check(results)
    assert checks["pins.neuronx-cc"].observed.startswith("2.26") and checks["pins.neuronx-cc"].expected == "2.26"
    assert checks["path.libneuronpjrt-path"].observed.endswith("/bin/libneuronpjrt-path")
    assert checks["neuron-cores"].status == "pass" and "2 cores" in checks["neuron-cores"].observed
    assert checks["cache.writable"].status == "pass"
    assert ("venv.vllm.no-optimum-neuron" in checks) == (role == "inf2")
    assert ("pins.trl" in checks) == (role == "trn1")
    assert checks["hf.token"].status == "skip"  # tiny models: no hub


def test_optimum_neuron_in_the_vllm_venv_fails_with_the_plugin_clash(tmp_path):
    r = _by_check(run_checks(_inputs(tmp_path, "inf2", Breakage(optimum_in_vllm=True))))["venv.vllm.no-optimum-neuron"]
    assert r.status == "fail" and "Only one platform plugin can be activated" in r.reason
    assert "pip uninstall -y optimum-neuron" in r.reason and r.observed == "0.4.3"


def test_a_cli_missing_from_the_lanes_path_names_it_and_where_it_belongs(tmp_path):
    inputs = _inputs(tmp_path, "trn1", Breakage(missing_cli="libneuronpjrt-path"))
    r = _by_check(run_checks(inputs))["path.libneuronpjrt-path"]
    assert r.status == "fail" and str(inputs.lane_env.venv / "bin") in r.reason and "PATH" in r.reason


def test_the_lanes_path_has_the_dlami_venv_bin_first(tmp_path):
    inputs = _inputs(tmp_path, "inf2")
    assert inputs.lane_env.env["PATH"].split(":")[0] == str(inputs.lane_env.venv / "bin")
    assert inputs.lane_env.env["HF_HOME"] == str(tmp_path / "cache" / "hf")


def test_busy_neuroncores_name_the_process_holding_them(tmp_path):
    r = _by_check(run_checks(_inputs(tmp_path, "inf2", Breakage(cores_busy=True))))["neuron-cores"]
    assert r.status == "fail" and "pid 4242" in r.reason and "vllm" in r.reason


def test_neuron_ls_output_is_parsed_and_garbage_is_a_reason():
    devices = parse_neuron_ls(neuron_ls_json("inf2.xlarge"))
    assert devices == [{"device": 0, "cores": 2, "processes": []}]
    with pytest.raises(ValueError, match="not JSON"):
        parse_neuron_ls("no neuron device found")


def test_a_compiler_at_another_version_fails_its_pin(tmp_path):
    r = _by_check(run_checks(_inputs(tmp_path, "inf2", Breakage(stale_compiler="2.27.100.0"))))["pins.neuronx-cc"]
    assert r.status == "fail" and r.observed == "2.27.100.0" and r.expected == "2.26"
    assert "pipeline/box_stack.py" in r.reason


def test_no_dlami_venv_on_a_neuron_backend_fails_the_venv_check(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "NEURONPIPE_CACHE": str(tmp_path / "cache")}
    inputs = PreflightInputs(
        box_role="inf2",
        backend="neuron",
        lane_env=build_lane_environment("preflight", base=env),
        models=[],
        dataset=None,
        cache_free_gib=0.0,
        max_clock_skew_s=60.0,
    )
    r = _by_check(run_checks(inputs))["venv.vllm"]
    assert r.status == "fail" and "NEURONPIPE_DLAMI_VENV is not set" in r.reason


def test_missing_training_pins_are_installed_into_the_training_venv_with_the_stack_held(tmp_path):
    inputs = _inputs(tmp_path, "trn1")
    site = next((inputs.lane_env.venv / "lib").glob("python*/site-packages"))
    for d in site.glob("trl-*.dist-info"):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    calls = []

    def fake_run(cmd, **kw):
        calls.append((cmd, Path(cmd[cmd.index("-c") + 1]).read_text()))
        (site / f"trl-{TRAINING_INSTALLS['trl']}.dist-info").mkdir()
        (site / f"trl-{TRAINING_INSTALLS['trl']}.dist-info" / "METADATA").write_text(
            f"Name: trl\nVersion: {TRAINING_INSTALLS['trl']}\n"
        )
        return subprocess.CompletedProcess(cmd, 0, "", "")

    inputs.run = fake_run
    checks = _by_check(run_checks(inputs))
    assert checks["install.training"].status == "pass" and checks["pins.trl"].status == "pass"
    cmd, constraints = calls[0]
    assert cmd[0] == str(inputs.lane_env.venv / "bin" / "python") and f"trl=={TRAINING_INSTALLS['trl']}" in cmd
    assert "torch-neuronx==2.9.0.2.15.32035+de43f57c" in constraints and "neuronx-cc==" in constraints


def test_a_failed_install_is_the_gates_reason(tmp_path):
    inputs = _inputs(tmp_path, "trn1")
    site = next((inputs.lane_env.venv / "lib").glob("python*/site-packages"))
    for d in site.glob("optimum_neuron-*.dist-info"):
        (d / "METADATA").unlink()
        d.rmdir()
    inputs.run = lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution")
    checks = _by_check(run_checks(inputs))
    assert (
        checks["install.training"].status == "fail" and "No matching distribution" in checks["install.training"].reason
    )
    assert checks["pins.optimum-neuron"].status == "fail"


class _Hub(BaseHTTPRequestHandler):
    answers: dict[str, int] = {}
    skew = timedelta(0)

    def do_HEAD(self):  # http.server's name
        repo = "/".join(self.path.strip("/").split("/")[:2])
        status = self.answers.get(repo, 404)
        if self.headers.get("Authorization") != "Bearer hf_good":
            status = 401
        self.send_response(status)  # sends the Date header, from date_time_string below
        self.end_headers()

    def date_time_string(self, timestamp=None):
        return format_datetime(datetime.now(timezone.utc) + self.skew, usegmt=True)

    def log_message(self, *a):
        pass


@pytest.fixture()
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _hub_inputs(tmp_path, hub, token="hf_good", **kw):
    inputs = _inputs(
        tmp_path,
        "inf2",
        models=[("llama", "meta-llama/Llama-3.1-8B-Instruct", None, True), ("qwen", "Qwen/Qwen3-8B", None, False)],
        token=lambda: (token, "the test"),
        **kw,
    )
    inputs.lane_env.env["HF_ENDPOINT"] = hub
    return inputs


def test_the_hub_licence_check_tells_an_unaccepted_licence_from_a_bad_token(tmp_path, hub):
    _Hub.answers, _Hub.skew = {"meta-llama/Llama-3.1-8B-Instruct": 403, "Qwen/Qwen3-8B": 200}, timedelta(0)
    checks = _by_check(run_checks(_hub_inputs(tmp_path, hub)))
    assert checks["hf.token"].status == "pass"
    assert checks["hf.licence.llama"].status == "fail"
    assert "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct" in checks["hf.licence.llama"].reason
    assert checks["hf.licence.qwen"].status == "pass"
    assert checks["clock"].status == "pass"  # the hub's Date header is the reference
    bad = _by_check(run_checks(_hub_inputs(tmp_path / "b", hub, token="hf_expired")))
    assert bad["hf.licence.qwen"].status == "fail" and "401" in bad["hf.licence.qwen"].reason


def test_an_unreadable_token_is_the_reason(tmp_path, hub):
    def no_token():
        raise RuntimeError("cannot read the Hugging Face token from Secrets Manager secret 'neuronpipe/hf-token'")

    inputs = _hub_inputs(tmp_path, hub)
    inputs.token = no_token
    r = _by_check(run_checks(inputs))["hf.token"]
    assert r.status == "fail" and "Secrets Manager secret 'neuronpipe/hf-token'" in r.reason


def test_a_clock_off_the_reference_fails(tmp_path, hub):
    _Hub.answers, _Hub.skew = {"Qwen/Qwen3-8B": 200, "meta-llama/Llama-3.1-8B-Instruct": 200}, timedelta(minutes=10)
    try:
        r = _by_check(run_checks(_hub_inputs(tmp_path, hub)))["clock"]
    finally:
        _Hub.skew = timedelta(0)
    assert r.status == "fail" and "chrony" in r.reason
    assert 598 <= int(r.observed.split()[0]) <= 601  # ten minutes, at an HTTP Date's 1 s resolution


def test_too_little_cache_space_and_an_unreadable_dataset_fail(tmp_path):
    inputs = _inputs(tmp_path, "trn1", cache_free_gib=10_000_000.0, dataset=str(tmp_path / "absent.jsonl"))
    checks = _by_check(run_checks(inputs))
    assert checks["cache.free_space"].status == "fail" and "GiB" in checks["cache.free_space"].reason
    assert checks["dataset"].status == "fail" and "absent.jsonl" in checks["dataset"].reason


def test_the_lane_keeps_its_rows_and_fails_the_gate_with_the_reasons(tmp_path, monkeypatch):
    from agents.runner import LaneRequest, run_lane

    venv = build_dlami(tmp_path / "box", "inf2", "inf2.xlarge", Breakage(optimum_in_vllm=True))
    monkeypatch.setenv("NEURONPIPE_DLAMI_VENV", str(venv))
    monkeypatch.setenv("NEURONPIPE_BOX_ROLE", "inf2")
    monkeypatch.setenv("NEURONPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NEURON_COMPILE_CACHE_URL", raising=False)
    store = open_store(tmp_path / "results")
    result = run_lane(LaneRequest(lane="preflight", run_id="r1", backend="cpu", telemetry_interval_s=0.05), store)
    assert result.status == "failed"
    assert "venv.vllm.no-optimum-neuron" in result.error_message
    assert "Only one platform plugin" in result.error_message
    rows = store.read_table("preflight_checks", ["r1"]).to_pylist()
    failed = [r for r in rows if r["status"] == "fail"]
    assert [r["check"] for r in failed] == ["venv.vllm.no-optimum-neuron"]
    assert {r["box_role"] for r in rows} == {"inf2"} and len(rows) > 8


def test_stale_compile_locks_are_cleared_unless_a_compiler_runs(tmp_path):
    from agents.preflight import clear_stale_locks

    module = tmp_path / "neuronxcc-2.26/MODULE_1+abc"
    module.mkdir(parents=True)
    (module / "model.hlo_module.pb.lock").write_text("")
    r = clear_stale_locks(tmp_path, running=lambda: ["4242 (neuronx-cc compile)"])
    assert r.status == "fail" and "4242" in r.reason and (module / "model.hlo_module.pb.lock").exists()
    r = clear_stale_locks(tmp_path, running=lambda: [])
    assert r.status == "pass" and "removed 1" in r.observed and not (module / "model.hlo_module.pb.lock").exists()
