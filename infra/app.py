"""The CDK app: ``python -m infra.app [--outdir cdk.out] [--setting name=value ...]`` synthesizes the five stacks.

``cdk.json`` points the CDK CLI here too (``cdk deploy`` runs this module). Run directly, the app
reads ``cdk.json``'s context itself (the CLI passes it through ``CDK_CONTEXT_JSON``); ``--setting``
overrides one ``neuronpipe`` setting (value parsed as JSON when it is JSON). Nothing is looked up:
AZs and sizes come from :mod:`infra.config`, the AMIs are pins or public SSM parameters EC2 resolves at a box's launch.
The Lambda layer must be built first (``make lambda-deps``): without it synth fails, unless
``require_lambda_deps`` is false (offline synth and tests; such templates must not be deployed). The same
deploy path refuses a deployment whose budget alerts would reach nobody: ``budget_alert_email`` must be an
address, or ``"none"`` to opt out on purpose (recorded in the template); and one whose boxes would find no current
hashed lock of their packages (``python -m infra.box_lock``).
The AwsSolutions cdk-nag pack runs on every synth; an unacknowledged finding fails it (exit status 1,
report in the outdir).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# jsii prints a boxed banner for Node 20; it is only a warning about the Node release.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.box_lock import BoxLockError, check_lock
from infra.bundling import ROOT, BundlingError, lambda_deps_ready, stage_harness, stage_lambda_code
from infra.config import (
    BUDGET_EMAIL_OPT_OUT,
    CONTEXT_KEY,
    PROJECT_TAG_KEY,
    STACK_BASE,
    STACK_CONTROL_PLANE,
    STACK_FLEET,
    STACK_INFERENTIA,
    STACK_TRAINIUM,
    DeploymentSettings,
    SettingsError,
)
from infra.stacks.athena import AthenaAnalytics
from infra.stacks.base import BaseStack
from infra.stacks.box import BoxStack
from infra.stacks.control import ControlPlaneStack
from infra.stacks.fleet import FleetStack

CDK_JSON = ROOT / "cdk.json"
ASL_PATH = ROOT / "statemachine" / "pipeline.asl.json"


@dataclass
class NeuronPipelinesApp:
    app: cdk.App
    settings: DeploymentSettings
    base: BaseStack
    trainium: BoxStack
    inferentia: BoxStack
    fleet: FleetStack
    control_plane: ControlPlaneStack

    @property
    def stacks(self) -> dict[str, cdk.Stack]:
        return {s.stack_name: s for s in (self.base, self.trainium, self.inferentia, self.fleet, self.control_plane)}


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    return dict(json.loads(path.read_text()).get("context", {})) if path.is_file() else {}


def _staging_dir(name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"neuronpipe-{name}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def build_app(
    outdir: str | None = None, context: dict[str, Any] | None = None, *, harness_sha: str | None = None
) -> NeuronPipelinesApp:
    """All five stacks in one app, the nag pack attached. ``context`` overrides cdk.json's."""
    ctx: dict[str, Any] = {}
    if "CDK_CONTEXT_JSON" not in os.environ:  # run directly, not by the CDK CLI
        ctx.update(cdk_json_context())
    for key, value in (context or {}).items():  # the neuronpipe settings merge key by key
        if key == CONTEXT_KEY and isinstance(ctx.get(key), str):
            ctx[key] = json.loads(ctx[key])
        if key == CONTEXT_KEY and isinstance(ctx.get(key), dict):
            ctx[key] = {**ctx[key], **value}
        else:
            ctx[key] = value
    app = cdk.App(outdir=outdir, context=ctx or None)
    settings = DeploymentSettings.from_context(app.node.try_get_context(CONTEXT_KEY))
    env = cdk.Environment(account=settings.account, region=settings.region)

    deps_dir: Path | None = (ROOT / settings.lambda_deps_dir).resolve()
    if not lambda_deps_ready(deps_dir):
        if settings.require_lambda_deps:
            raise LambdaLayerMissingError(deps_dir)
        deps_dir = None
    if settings.require_lambda_deps and settings.budget_alert_email is None:
        raise BudgetSubscriberMissingError()
    if settings.require_lambda_deps:
        check_lock()  # the boxes install only from it
    harness_dir = stage_harness(_staging_dir("harness"), sha=harness_sha)
    code_dir = stage_lambda_code(_staging_dir("lambda"))

    desc = "neuron-pipelines: LoRA SFT on trn1, vLLM on inf2, measured ({})"
    base = BaseStack(
        app,
        STACK_BASE,
        settings=settings,
        harness_dir=harness_dir,
        env=env,
        description=desc.format("network, results bucket, budget"),
    )
    base.athena = AthenaAnalytics(base, "Athena", settings=settings, bucket=base.results_bucket)  # in the base stack
    trainium = BoxStack(
        app, STACK_TRAINIUM, role="trn1", settings=settings, base=base, env=env, description=desc.format("trn1 box")
    )
    inferentia = BoxStack(
        app, STACK_INFERENTIA, role="inf2", settings=settings, base=base, env=env, description=desc.format("inf2 box")
    )
    fleet = FleetStack(
        app,
        STACK_FLEET,
        settings=settings,
        base=base,
        env=env,
        description=desc.format("fleet: launch templates of the ephemeral boxes, their role"),
    )
    control = ControlPlaneStack(
        app,
        STACK_CONTROL_PLANE,
        settings=settings,
        base=base,
        boxes=[trainium, inferentia],
        fleet=fleet,
        code_dir=code_dir,
        deps_dir=deps_dir,
        asl_path=ASL_PATH,
        env=env,
        description=desc.format("state machine, Lambdas, rules"),
    )
    cdk.Tags.of(app).add(PROJECT_TAG_KEY, settings.project)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    return NeuronPipelinesApp(app, settings, base, trainium, inferentia, fleet, control)


class LambdaLayerMissingError(BundlingError):
    """Deploy path without the Lambda dependency layer: the handlers would fail at import."""

    def __init__(self, deps_dir: Path):
        super().__init__(
            f"Lambda dependency layer missing at {deps_dir}: run `make lambda-deps` before synth/deploy "
            "(offline synth only: setting require_lambda_deps=false)"
        )


class BudgetSubscriberMissingError(SettingsError):
    """Deploy path without ``budget_alert_email``: the budget's SNS topic has no subscriber, alerts reach nobody."""

    def __init__(self) -> None:
        super().__init__(
            "budget alerts would reach nobody: set cdk.json context.neuronpipe.budget_alert_email to "
            f'the address that gets them (or "{BUDGET_EMAIL_OPT_OUT}" to deploy without one, on '
            "purpose; recorded in the template)"
        )


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``name=value`` pairs as neuronpipe settings; a value that parses as JSON is taken as JSON."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise SettingsError(f"--setting {pair!r}: expected name=value")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


class SynthFailedError(RuntimeError):
    """Synthesis ran but validation (cdk-nag) reported unacknowledged findings."""


def synth(built: NeuronPipelinesApp) -> cdk.cx_api.CloudAssembly:
    try:
        return built.app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" in type(exc).__name__ or "Validation failed" in str(exc):
            raise SynthFailedError(str(exc)) from exc
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.app", description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", default=None, help="cloud assembly directory (default: CDK_OUTDIR or cdk.out)")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one cdk.json neuronpipe setting (e.g. require_lambda_deps=false)",
    )
    args = parser.parse_args(argv)
    try:
        overrides = parse_settings(args.setting)
        built = build_app(outdir=args.outdir, context={CONTEXT_KEY: overrides} if overrides else None)
        assembly = synth(built)
    except (SynthFailedError, BundlingError, SettingsError, BoxLockError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for stack in assembly.stacks:
        print(f"{stack.stack_name}: {Path(assembly.directory, stack.template_file)}")
        for msg in stack.messages:
            if msg.level != "info":
                print(f"  {msg.level.name.lower()}: {msg.entry.data}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
