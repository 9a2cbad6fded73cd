"""`neuronpipe` as a person runs it, for the tests that drive whole local runs: the command in a subprocess, and
`query` over the results it wrote."""
from __future__ import annotations

import json
import subprocess
import sys


def neuronpipe(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "control_plane.cli", *args], capture_output=True, text=True,
                         timeout=timeout)
    if check:
        assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    return out


def query(results: str, sql: str) -> list[dict]:
    """Rows of ``neuronpipe query --format json`` over ``results``."""
    out = neuronpipe("query", "--results", results, "--format", "json", sql)
    return [json.loads(line) for line in out.stdout.splitlines()]


def run_local(tmp_path, request: dict, run_id: str, check: bool = True) -> tuple[str, object]:
    """``neuronpipe run --local`` of ``request`` (written to ``tmp_path/run.json``); (results dir, report dir)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    results, report = str(tmp_path / "results"), tmp_path / "report"
    neuronpipe("run", "--local", "--input", str(path), "--results", results, "--report", str(report),
               "--run-id", run_id, "--no-live", check=check)
    return results, report
