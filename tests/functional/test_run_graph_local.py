"""`neuronpipe run --local` follows the run's dependency graph and owns its lane processes (issues 14 and 15).

Instant lanes from tests/fixtures/graph_lanes.py (behaviour by name prefix); every verdict is read back from
the store, never from the CLI's words alone.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from analytics.store import LocalStore
from tests.conftest import ROOT

MODULE = "tests.fixtures.graph_lanes"


def lanes_env(tmp_path: Path, spec: str) -> dict[str, str]:
    """``spec``: "name:order[:needA+needB],..." -> the environment that registers them (also for children)."""
    extra = ",".join(f"{name}={MODULE}:{rest}" for name, _, rest in (s.partition(":") for s in spec.split(",")))
    (tmp_path / "g").mkdir(exist_ok=True)
    return {
        **os.environ,
        "NEURONPIPE_EXTRA_LANES": extra,
        "GRAPH_DIR": str(tmp_path / "g"),
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def neuronpipe(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def lane_rows(results: Path, run_id: str) -> list[dict]:
    return LocalStore(results).read_table("lane_runs", [run_id]).to_pylist()


def standing(results: Path, run_id: str) -> dict[str, dict]:
    """Each lane's newest attempt that ran or was blocked (a resume's "already committed" record is not one)."""
    out: dict[str, dict] = {}
    for r in sorted(lane_rows(results, run_id), key=lambda r: r["attempt"]):
        if r["supersedes"] or r["blocked_by"]:
            out[r["lane"]] = r
    return out


def test_a_failed_lane_skips_its_consumer_the_rest_commit_the_run_is_partial_and_a_resume_runs_it(tmp_path):
    env = lanes_env(tmp_path, "flaky_p:5,ok_c:6:flaky_p,ok_d:7")
    results = tmp_path / "r"
    out = neuronpipe(
        env, "run", "--local", "--lanes", "flaky_p,ok_c,ok_d", "--results", str(results), "--run-id", "g1", "--no-live"
    )
    assert out.returncode == 3, out.stderr  # partial
    st = standing(results, "g1")
    assert st["flaky_p"]["status"] == "failed" and st["ok_d"]["status"] == "succeeded"
    blocked = st["ok_c"]
    assert (blocked["status"], blocked["blocked_by"], blocked["supersedes"]) == ("skipped", "flaky_p", False)
    assert blocked["skip_reason"].startswith(f"needs flaky_p, which failed in attempt {st['flaky_p']['attempt']}")
    err = out.stderr.splitlines()
    # the lane's own error on the terminal, its log path on the next line
    i = err.index("lane flaky_p failed: DeviceFaultError: device fault on core 3 (injected)")
    log = Path(err[i + 1].split("log: ", 1)[1])
    assert "DeviceFaultError" in log.read_text()
    assert any(line.startswith("[g1] ok_c: skipped") and "needs flaky_p, which failed" in line for line in err)
    (outcome,) = [line for line in err if line.startswith("outcome:")]
    assert outcome.startswith("outcome: partial — failed: flaky_p (DeviceFaultError: device fault on core 3")
    assert "; skipped: ok_c (needs flaky_p, which failed in attempt" in outcome

    (tmp_path / "g" / "fixed").write_text("")  # the producer is fixed: the same command resumes
    again = neuronpipe(
        env, "run", "--local", "--lanes", "flaky_p,ok_c,ok_d", "--results", str(results), "--run-id", "g1", "--no-live"
    )
    assert again.returncode == 0, again.stderr
    st = standing(results, "g1")
    assert {lane: r["status"] for lane, r in st.items()} == {
        "flaky_p": "succeeded",
        "ok_c": "succeeded",
        "ok_d": "succeeded",
    }
    assert "outcome: succeeded" in again.stderr
    resumed = [r for r in lane_rows(results, "g1") if r["lane"] == "ok_d" and not r["supersedes"]]
    assert [r["skip_reason"].startswith("already committed") for r in resumed] == [True]


def test_a_failed_gate_blocks_the_lanes_after_it_and_the_run_fails(tmp_path, monkeypatch):
    from control_plane.local import run_local
    from pipeline import lanes as registry

    env = lanes_env(tmp_path, "fail_gate:3,ok_x:9")
    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", env["NEURONPIPE_EXTRA_LANES"])
    monkeypatch.setenv("GRAPH_DIR", env["GRAPH_DIR"])
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    extra = registry._extra_lanes  # extra lanes are never gates: make this one a gate (the parent decides)
    monkeypatch.setattr(
        registry, "_extra_lanes", lambda: {n: dataclasses.replace(s, gate=n == "fail_gate") for n, s in extra().items()}
    )
    results = tmp_path / "r"
    console = Console(file=io.StringIO(), width=200)
    out = run_local(["ok_x", "fail_gate"], "g2", str(results), console=console, live=False)
    assert (out.run.status, out.exit_code) == ("failed", 1)
    assert out.run.why == "gate fail_gate did not pass"
    st = standing(results, "g2")
    assert st["fail_gate"]["status"] == "failed"
    assert (st["ok_x"]["status"], st["ok_x"]["blocked_by"]) == ("skipped", "fail_gate")
    assert st["ok_x"]["skip_reason"].startswith("gate fail_gate did not pass: it failed in attempt")
    assert [s.pid for s in out.lanes if s.name == "ok_x"] == [None]  # no process for a blocked lane


def test_parallel_runs_independent_lanes_at_once_and_a_consumer_after_its_need(tmp_path):
    env = lanes_env(tmp_path, "pair_a:5,pair_b:6,ok_z:7:pair_a")
    results = tmp_path / "r"
    out = neuronpipe(
        env,
        "run",
        "--local",
        "--lanes",
        "pair_a,pair_b,ok_z",
        "--parallel",
        "2",
        "--results",
        str(results),
        "--run-id",
        "g3",
        "--no-live",
    )
    assert out.returncode == 0, out.stderr
    st = standing(results, "g3")
    a, b, z = st["pair_a"], st["pair_b"], st["ok_z"]
    assert a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]  # the two intervals overlap
    assert z["status"] == "succeeded" and z["started_at"] >= a["ended_at"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_run_local_mid_lane_leaves_no_lane_process_and_nothing_committed(tmp_path, sig):
    env = lanes_env(tmp_path, "hang_h:5")
    results = tmp_path / "r"
    pid_file = tmp_path / "g" / "hang_h.pid"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "control_plane.cli",
            "run",
            "--local",
            "--lanes",
            "hang_h",
            "--results",
            str(results),
            "--run-id",
            "g4",
            "--no-live",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert pid_file.exists(), proc.communicate(timeout=30)
        lane = psutil.Process(int(pid_file.read_text()))
        assert "run-lane" in lane.cmdline()
        proc.send_signal(sig)  # the CLI only, not its group
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == (143 if sig == signal.SIGTERM else -signal.SIGKILL), err  # 128 + SIGTERM
        lane.wait(timeout=30)  # psutil.TimeoutExpired if the lane survived its CLI
        assert not [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if "run-lane" in (p.info["cmdline"] or []) and str(results) in p.info["cmdline"]
        ]
        assert [m.lane for m in LocalStore(results).markers("g4")] == []  # nothing committed, now or later
        if sig == signal.SIGTERM:
            assert "interrupted" in err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_verdict_comes_from_the_store_and_a_lane_that_committed_nothing_shows_its_last_log_line(tmp_path):
    env = lanes_env(tmp_path, "diecommit_k:5,ok_m:6")
    env["NEURONPIPE_EXTRA_LANES"] += ",nomod_x=tests.fixtures.no_such_lane_module:7"
    results = tmp_path / "r"
    out = neuronpipe(
        env,
        "run",
        "--local",
        "--lanes",
        "diecommit_k,nomod_x",
        "--results",
        str(results),
        "--run-id",
        "g5",
        "--no-live",
    )
    assert out.returncode == 3, out.stderr
    st = standing(results, "g5")
    assert st["diecommit_k"]["status"] == "succeeded"  # the process died by SIGKILL after its commit
    assert "nomod_x" not in st
    err = out.stderr.splitlines()
    assert any(line.startswith("[g5] diecommit_k: succeeded") for line in err)
    i = err.index("lane nomod_x failed: ModuleNotFoundError: No module named 'tests.fixtures.no_such_lane_module'")
    assert err[i + 1].startswith("  log: ") and Path(err[i + 1][7:]).exists()
    (outcome,) = [line for line in err if line.startswith("outcome:")]
    assert outcome.startswith("outcome: partial — failed: nomod_x (ModuleNotFoundError")


REFUSALS = [
    (["--lanes", ""], "--lanes '' names no lane; valid lanes:"),
    (["--lanes", ","], "--lanes ',' names no lane; valid lanes:"),
    (["--lanes", "t_ok", "--run-id", "a/b"], "invalid run id 'a/b'"),
    (["--lanes", "t_ok", "--run-id=-x"], "invalid run id '-x'"),
    (["--lanes", "t_ok", "--run-id", "r" * 81], "invalid run id"),
    (["--lanes", "t_ok", "--run-id", "a b"], "invalid run id 'a b'"),
    (["--input", "{req}"], "lane_config t_ok.nope: unknown field; valid fields: value"),
    (["--input", "{req}"], "lane_config t_ok.value: expected float, got str 'x'"),
]


@pytest.mark.usefixtures("test_lanes")
@pytest.mark.parametrize("args,line", REFUSALS)
def test_bad_input_is_refused_with_one_clear_line_and_nothing_written(tmp_path, capsys, args, line):
    from control_plane.cli import main

    req = tmp_path / "req.json"
    req.write_text(json.dumps({"lanes": ["t_ok"], "lane_config": {"t_ok": {"nope": 1, "value": "x"}}}))
    results = tmp_path / "r"
    argv = ["run", "--local", "--results", str(results), "--no-live", *[a.format(req=req) for a in args]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert any(e.startswith("error: ") and line in e for e in err.splitlines()), err
    assert "Traceback" not in err and not results.exists()


@pytest.mark.usefixtures("test_lanes")
def test_parallel_must_be_a_positive_whole_number(tmp_path, capsys):
    from control_plane.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--local", "--lanes", "t_ok", "--parallel", "0", "--results", str(tmp_path / "r")])
    assert exc.value.code == 2 and "must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
