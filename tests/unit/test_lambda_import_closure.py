"""Every Lambda handler imports with only the Lambda layer's packages (infra/lambda-requirements.txt) and what
the Lambda runtime provides: a module-level import of a box-side package (httpx, numpy, torch, ...) from code a
handler reaches fails only on AWS (the rehearsal's fault matrix caught one: the SLO module under agents.serving,
whose package imports the HTTP launcher). Checked here in one subprocess with the other packages blocked.

Planning needs only the rules (``pipeline``): after every handler is imported, a request validated, an event
turned into a request and a request planned (lane configs checked against every lane's Config), no module of
``agents`` (the box-side code) is loaded; and every first-party package the handlers loaded is one the Lambda
code asset carries (``infra.bundling.FIRST_PARTY``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from infra.bundling import FIRST_PARTY

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.stem for p in (ROOT / "control_plane" / "handlers").glob("*.py") if p.stem != "__init__")
# importable in the Lambda: the layer's pins, their dependencies, the runtime's boto3/botocore, the stdlib
BLOCKED = (
    "httpx",
    "aiohttp",
    "torch",
    "transformers",
    "psutil",
    "rich",
    "matplotlib",
    "peft",
    "trl",
    "uvloop",
    "vllm",
    "torch_neuronx",
    "optimum",
)

PROBE = """
import importlib, importlib.abc, json, sys
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
from control_plane.handlers.plan_run import request_from_event
from control_plane.plan import plan_run
request, run_id = request_from_event({'preset': 'full', 'slo': 'cpu-tiny', 'lane_config': {
    'sft': {'steps': 3}, 'host_cpu': {'repeats': 2}, 'serve_sweep': {'slo_ttft_ms': 900.0}}})
plan = plan_run(request, run_id=run_id, results_uri='s3://bucket/results')
# the wave scheduler's work (schedule_wave's logic over a store): first wave, then a wave with its box failed,
# so the lanes that never reach a box are recorded blocked through the store
import tempfile
from analytics.store import LocalStore
from control_plane.waves import schedule
store = LocalStore(tempfile.mkdtemp())
payload = plan.with_instances({'trn1': 'i-0trn1', 'inf2': 'i-0inf2'}).execution_input()
first = schedule(payload, store)
failed = [{'box_role': s['box_role'], 'status': 'failed', 'error': 'BoxFailed', 'cause': 'probe'}
          for w in payload['waves'][:1] for s in w['segments']]
schedule({**payload, 'schedule': first.get('schedule') or {'next_wave': 1}, 'results': failed}, store)
blocked = sum(r['status'] == 'skipped' for r in store.read_table('lane_runs', [run_id]).to_pylist())
root = sys.argv[3]
loaded = {name.split('.')[0] for name, m in list(sys.modules.items())
          if (getattr(m, '__file__', None) or '').startswith(root + '/') and '/.venv/' not in m.__file__}
print(json.dumps({'blocked': blocked, 'agents': sorted(m for m in sys.modules if m.split('.')[0] == 'agents'),
                  'first_party': sorted(loaded)}))
sys.stdout.flush()
# the answer is printed: leave without the interpreter's teardown, where a native thread pool (pyarrow's, after the
# store read above) once aborted the process ("terminate called without an active exception") under load
import os
os._exit(0)
"""


def test_every_handler_imports_plans_and_schedules_with_the_lambda_layer_only_and_without_agents():
    assert "plan_run" in HANDLERS and "schedule_wave" in HANDLERS
    out = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(BLOCKED), ",".join(HANDLERS), str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-west-2", "POWERTOOLS_SERVICE_NAME": "test"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded["blocked"] > 0, "the probe's failed first wave recorded no blocked lane"
    assert loaded["agents"] == [], f"planning imported box-side modules: {', '.join(loaded['agents'])}"
    assert "pipeline" in loaded["first_party"] and "control_plane" in loaded["first_party"]
    missing = sorted(set(loaded["first_party"]) - set(FIRST_PARTY))
    assert not missing, f"the Lambda code asset (infra.bundling.FIRST_PARTY) lacks {', '.join(missing)}"
