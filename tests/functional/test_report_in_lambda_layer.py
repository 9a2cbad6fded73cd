"""The finalize Lambda's report, built as the Lambda builds it: in a ``python -I -S`` process whose path is the
standard library, the staged Lambda code (``infra.bundling.stage_lambda_code``) and a layer holding exactly the
layer's packages (``infra/lambda-requirements.txt`` and their dependency closure: ``rehearsal.lambdas.build_layer``,
as the rehearsal's Lambda workers run), for a store with every section's rows (``tests/support/report_store.py``:
two runs side by side, so the run-level paired tests and their statistics run too). A report module importing a
package the layer lacks fails here, not after a paid run; the second test shows the check can fail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.bundling import LAMBDA_REQUIREMENTS, stage_lambda_code
from rehearsal.lambdas import build_layer
from tests.support.report_store import RUNS, write_report_store

PROBE = """
import json, sys
code_dir, layer_dir, results, out = sys.argv[1:5]
sys.path[:0] = [code_dir, layer_dir]
try:
    from control_plane.handlers.finalize_run import load_report_builder
    paths = load_report_builder()(results, sys.argv[5].split(','), out)
    answer = {"files": sorted(p.rsplit('/', 1)[-1] for p in map(str, paths)),
              "third_party": sorted({m.split('.')[0] for m, mod in list(sys.modules.items())
                                     if (getattr(mod, '__file__', None) or '').startswith(layer_dir)})}
except Exception as exc:
    answer = {"error": type(exc).__name__, "message": str(exc)}
print(json.dumps(answer))
sys.stdout.flush()
import os
os._exit(0)
"""


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("lambda")
    code = stage_lambda_code(root / "code")
    write_report_store(root / "results", requests_per_point=12)
    return root, code


def _build(root: Path, code: Path, layer: Path, name: str) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            PROBE,
            str(code),
            str(layer),
            str(root / "results"),
            str(root / name),
            ",".join(RUNS),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_DEFAULT_REGION": "us-west-2",
            "POWERTOOLS_SERVICE_NAME": "test",
            "MPLBACKEND": "Agg",
        },
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # ~20 s: a whole report with every section, in a fresh interpreter
def test_the_report_builds_with_every_section_from_the_layers_packages_alone(staged, tmp_path_factory):
    root, code = staged
    layer = build_layer(tmp_path_factory.mktemp("layers"), LAMBDA_REQUIREMENTS)
    answer = _build(root, code, layer, "report")
    assert "error" not in answer, answer
    assert {"REPORT.md", "REPORT.html", "comparison.json"} <= set(answer["files"])
    assert "numpy" in answer["third_party"]  # the paired tests ran on the layer's numpy, not the venv's
    text = (root / "report" / "REPORT.md").read_text()
    assert "Traceback" not in text


def test_a_layer_without_a_package_the_report_needs_fails_the_build(staged, tmp_path_factory):
    root, code = staged
    lacking = tmp_path_factory.mktemp("req") / "lambda-requirements.txt"
    lacking.write_text(
        "".join(line + "\n" for line in LAMBDA_REQUIREMENTS.read_text().splitlines() if not line.startswith("numpy"))
    )
    layer = build_layer(tmp_path_factory.mktemp("layers-lacking"), lacking)
    answer = _build(root, code, layer, "report-lacking")
    assert answer.get("error") == "ModuleNotFoundError" and "numpy" in answer["message"], answer
