"""One synthesized app for the whole tests/infra session (each jsii synth spawns node: ~20 s)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

OFFLINE = {"require_lambda_deps": False}  # every synth in tests/infra says so explicitly


def _synth_variant(outdir: Path, **settings: Any) -> dict[str, dict[str, Any]]:
    """Synthesize the app with these neuronpipe settings (offline, cdk-nag enforced): the templates."""
    from infra.app import build_app, synth
    from infra.config import STACK_NAMES

    os.environ.pop("CDK_CONTEXT_JSON", None)
    built = build_app(outdir=str(outdir), harness_sha="0" * 40, context={"neuronpipe": {**OFFLINE, **settings}})
    synth(built)  # raises SynthFailedError on an unacknowledged cdk-nag finding
    return {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in STACK_NAMES}


@dataclass
class Synthesized:
    outdir: Path
    settings: Any
    templates: dict[str, dict[str, Any]]
    report: dict[str, Any] | None
    error: Exception | None
    messages: dict[str, list[str]]
    app: Any = None  # infra.app.NeuronPipelinesApp: the constructs themselves

    def template(self, stack: str):
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[stack])

    def resources(self, stack: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == type_}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from infra.app import SynthFailedError, build_app, synth
    from infra.config import STACK_NAMES

    os.environ.pop("CDK_CONTEXT_JSON", None)  # read cdk.json, exactly as `make synth` does
    outdir = tmp_path_factory.mktemp("cdk.out")
    # A stand-in layer folder: the real one (`python -m infra.bundling deps`) is ~170 MiB and needs PyPI.
    deps = tmp_path_factory.mktemp("lambda-deps")
    (deps / "python").mkdir()
    (deps / "python" / "README.txt").write_text("stand-in for the Lambda dependency layer\n")
    # require_lambda_deps=false explicitly (INTERFACES E): tests never depend on `make lambda-deps`;
    # the stand-in folder still puts a layer on every function, as a deploy would.
    built = build_app(
        outdir=str(outdir), harness_sha="0" * 40, context={"neuronpipe": {**OFFLINE, "lambda_deps_dir": str(deps)}}
    )
    error: Exception | None = None
    messages: dict[str, list[str]] = {}
    try:
        assembly = synth(built)
        messages = {s.stack_name: [str(m.entry.data) for m in s.messages] for s in assembly.stacks}
    except SynthFailedError as exc:
        error = exc
    templates = {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in STACK_NAMES}
    report_path = outdir / "policy-validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    return Synthesized(outdir, built.settings, templates, report, error, messages, built)


@pytest.fixture(scope="session")
def synth_variant():
    """``synth_variant(outdir, **settings)``: a separate offline synth with these settings (~15-30 s)."""
    return _synth_variant


@pytest.fixture(scope="session")
def redeploy(tmp_path_factory, synth_variant):
    """Second synth: re-deploy over the retained bucket, a dataset outside results/, explicit AMI pins, a budget
    e-mail, the boxes in different AZs."""
    return synth_variant(
        tmp_path_factory.mktemp("cdk.out.redeploy"),
        existing_results_bucket=True,
        dataset_uri="s3://team-datasets/sft/alpaca/",
        trainium_ami_id="ami-0123456789abcdef0",
        inferentia_ami_id="ami-0fedcba9876543210",
        max_cost_usd_ceiling=12.5,
        budget_alert_email="ops@example.com",
        inferentia_az="us-west-2c",
        # two named schedules: the nightly smoke switched on, and a weekly serving run naming its own baseline
        schedules=[
            {
                "name": "nightly-smoke",
                "expression": "cron(30 5 * * ? *)",
                "request": {"preset": "smoke"},
                "enabled": True,
            },
            {
                "name": "weekly-serve",
                "expression": "rate(7 days)",
                "request": {"lanes": ["serve_sweep"], "profile": "tiny", "baseline": "serve-golden"},
                "baseline_last": 3,
            },
        ],
    )
