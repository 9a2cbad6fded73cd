"""Scripts the state machine sends run under the SSM agent's shell (/bin/sh = dash), for real.

The SSM agent writes the ``commands`` list, joined by newlines, to ``_script.sh`` (mode 0755) and runs
``/bin/sh -c <file>``. These tests render every script the planner makes, check both shells parse it,
and run it that way against a fake harness under ``$NEURONPIPE_BOX_ROOT`` and a loopback IMDS.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from control_plane.aws import token_from_commands
from control_plane.box_scripts import BASH_GUARD, Harness, sync_script
from control_plane.models import RunRequest
from control_plane.plan import plan_run
from statemachine.build import SHEBANG, TOKEN_LINE_PREFIX, build_definition

DASH = shutil.which("dash")
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(not (DASH and BASH), reason="needs dash and bash")


def rendered_scripts() -> dict[str, str]:
    plan = plan_run(
        RunRequest(preset="full", force=True, lane_config={"sft": {"steps": 3}}),
        run_id="r-1",
        results_uri="s3://b/results",
    )
    scripts = {f"{s.box_role}:{s.lane}": s.script for s in plan.lane_steps}
    scripts["sync"] = plan.segments[0].sync.script
    scripts["sync-package"] = sync_script(Harness(package_uri="s3://b/harness/pkg.tar.gz"))
    return scripts


def command_file(tmp_path: Path, script: str, token: str = "tok-123") -> Path:
    """What the agent writes: the ASL's commands array joined by newlines."""
    path = tmp_path / "_script.sh"
    path.write_text("\n".join([SHEBANG, f'{TOKEN_LINE_PREFIX}"{token}"', script]))
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("name, script", sorted(rendered_scripts().items()))
def test_every_rendered_script_parses_in_dash_and_bash(name, script, tmp_path):
    lines = script.splitlines()
    assert lines[0] == BASH_GUARD and lines[1] == "set -euo pipefail", name
    path = command_file(tmp_path, script)
    for shell in (DASH, BASH):
        proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{shell} -n {name}: {proc.stderr}"


def test_every_box_path_is_under_the_box_root_and_imds_is_configurable():
    for name, script in rendered_scripts().items():
        assert "169.254.169.254/" not in script.replace("${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}", ""), name
        for path in ("/opt/neuronpipe", "/usr/local/bin/neuronpipe-sync"):
            assert script.count(path) == script.count(f'"${{NEURONPIPE_BOX_ROOT:-}}"{path}'), (name, path)


def test_the_asl_sends_the_shebang_first_then_the_token_then_the_script():
    text = json.dumps(build_definition())
    arrays = [p for p in text.split('"commands.$": ')[1:]]
    assert len(arrays) >= 2  # SyncHarness, RunLane, and any other SSM task: each sends the shebang first
    for a in arrays:
        assert a.startswith(f"\"States.Array('{SHEBANG}', States.Format('{TOKEN_LINE_PREFIX}")


def test_the_old_form_fails_under_sh_with_illegal_option_pipefail(tmp_path):
    """Why the shebang and the guard exist: dash has no pipefail (what a first deploy hit)."""
    path = tmp_path / "_script.sh"
    path.write_text('export NEURONPIPE_TASK_TOKEN="t"\nset -euo pipefail\necho reached\n')
    path.chmod(0o755)
    proc = subprocess.run(["/bin/sh", "-c", str(path)], capture_output=True, text=True)
    if os.path.realpath("/bin/sh") == os.path.realpath(BASH):
        pytest.skip("/bin/sh is bash here")
    assert proc.returncode != 0 and "reached" not in proc.stdout
    assert "Illegal option -o pipefail" in proc.stderr


class _Imds(http.server.BaseHTTPRequestHandler):
    META = {"instance-id": "i-0feedc0ffee000001", "instance-type": "trn1.2xlarge", "placement/region": "us-west-2"}

    def do_PUT(self):
        self._send(200, "imds-token" if self.path == "/latest/api/token" else "")

    def do_GET(self):
        ok = self.headers.get("X-aws-ec2-metadata-token") == "imds-token"
        key = self.path.removeprefix("/latest/meta-data/")
        self._send(200, self.META[key]) if ok and key in self.META else self._send(401 if not ok else 404, "")

    def _send(self, code: int, body: str) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):  # quiet
        return None


@pytest.fixture
def imds():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def box(tmp_path):
    """A sandbox box: fake harness venv python and a fake aws CLI that record how they were called."""
    root = tmp_path / "box"
    venv_bin = root / "opt/neuronpipe/.venv/bin"
    venv_bin.mkdir(parents=True)
    record = tmp_path / "calls.txt"
    fake = (
        '#!/bin/sh\n{{ printf "%s" "{name}"; for a in "$@"; do printf " [%s]" "$a"; done; '
        'printf " id=%s type=%s region=%s\\n" "$NEURONPIPE_INSTANCE_ID" "$NEURONPIPE_INSTANCE_TYPE" '
        '"$AWS_DEFAULT_REGION"; }} >> ' + str(record) + "\n"
    )
    (venv_bin / "python").write_text(fake.format(name="python"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "aws").write_text(fake.format(name="aws"))
    for p in (venv_bin / "python", bindir / "aws"):
        p.chmod(0o755)
    env = {**os.environ, "NEURONPIPE_BOX_ROOT": str(root), "PATH": f"{bindir}:{os.environ['PATH']}"}
    return {"root": root, "record": record, "env": env}


def test_lane_script_runs_under_sh_and_execs_the_agent_with_the_token_and_imds_facts(tmp_path, box, imds):
    plan = plan_run(RunRequest(lanes=["provenance"]), run_id="r-9", results_uri="s3://b/results")
    path = command_file(tmp_path, plan.lane_steps[0].script, token="tok-lane")
    proc = subprocess.run(
        ["/bin/sh", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**box["env"], "NEURONPIPE_IMDS_ENDPOINT": imds},
    )
    assert proc.returncode == 0, proc.stderr
    assert "pipefail" not in proc.stderr
    call = box["record"].read_text().strip()
    assert call.startswith("python [-m] [agents] [run-lane] [provenance] [--run-id] [r-9]")
    assert "[--task-token] [tok-lane]" in call
    assert "id=i-0feedc0ffee000001 type=trn1.2xlarge region=us-west-2" in call


def test_sync_script_runs_under_sh_and_calls_back_with_the_token(tmp_path, box, imds):
    sync_bin = box["root"] / "usr/local/bin"
    sync_bin.mkdir(parents=True)
    marker = tmp_path / "synced"
    (sync_bin / "neuronpipe-sync").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (sync_bin / "neuronpipe-sync").chmod(0o755)
    path = command_file(tmp_path, sync_script(Harness()), token="tok-sync")
    proc = subprocess.run(
        ["/bin/sh", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**box["env"], "NEURONPIPE_IMDS_ENDPOINT": imds},
    )
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()  # neuronpipe-sync under the box root ran
    calls = box["record"].read_text().splitlines()
    assert calls[0].startswith("python [-m] [agents] [lanes]")
    assert calls[1].startswith(
        "aws [stepfunctions] [send-task-success] [--region] [us-west-2] [--task-token] [tok-sync]"
    )


def test_run_as_sh_file_the_guard_hands_over_to_bash(tmp_path, box, imds):
    """Without the kernel's shebang hand-over (``sh file``) the guard still gets the script to bash."""
    plan = plan_run(RunRequest(lanes=["provenance"]), run_id="r-9", results_uri="s3://b/results")
    path = command_file(tmp_path, plan.lane_steps[0].script)
    proc = subprocess.run(
        [DASH, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**box["env"], "NEURONPIPE_IMDS_ENDPOINT": imds},
    )
    assert proc.returncode == 0, proc.stderr
    assert "[--task-token] [tok-123]" in box["record"].read_text()


def test_the_token_line_is_found_among_the_commands():
    assert token_from_commands([SHEBANG, f'{TOKEN_LINE_PREFIX}"AAAA+/b=="', "set -e"]) == "AAAA+/b=="
