"""Every Lambda handler imports with only the Lambda layer's packages (infra/lambda-requirements.txt) and what
the Lambda runtime provides: a module-level import of a box-side package (httpx, numpy, torch, ...) from code a
handler reaches fails only on AWS (the rehearsal's fault matrix caught one: the SLO module under agents.serving,
whose package imports the HTTP launcher). Checked here in one subprocess with the other packages blocked."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.stem for p in (ROOT / "control_plane" / "handlers").glob("*.py") if p.stem != "__init__")
# importable in the Lambda: the layer's pins, their dependencies, the runtime's boto3/botocore, the stdlib
BLOCKED = ("httpx", "aiohttp", "numpy", "torch", "transformers", "psutil", "rich", "matplotlib", "peft", "trl",
           "uvloop", "vllm", "torch_neuronx", "optimum")

PROBE = """
import importlib, importlib.abc, sys
blocked = set(sys.argv[1].split(','))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the Lambda layer)")
        return None
sys.meta_path.insert(0, Block())
for handler in sys.argv[2].split(','):
    importlib.import_module('control_plane.handlers.' + handler)
from control_plane.models import RunRequest
RunRequest.model_validate({'preset': 'full', 'slo': 'mlperf-v5.1-llama3.1-8b-interactive'})
print('ok')
"""


def test_every_handler_imports_with_the_lambda_layer_only():
    assert "plan_run" in HANDLERS and "schedule_wave" in HANDLERS
    out = subprocess.run([sys.executable, "-c", PROBE, ",".join(BLOCKED), ",".join(HANDLERS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-west-2",
                              "POWERTOOLS_SERVICE_NAME": "test"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
