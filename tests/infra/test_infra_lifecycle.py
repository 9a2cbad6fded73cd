"""The deploy lifecycle: what a second `cdk deploy` and the months between deploys do to a deployment.

The image id survives a new DLAMI; a deploy without a budget subscriber refuses; a box may list what it reads
(adapter directories, the shared compile cache); the bucket refuses an overwrite whoever sends it; the NAT gateway
sits where the boxes are; the state machine's log holds no task token."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import (
    APPEND_ONLY_KEY_PATTERNS,
    STACK_BASE,
    STACK_CONTROL_PLANE,
    STACK_INFERENTIA,
    STACK_TRAINIUM,
    TRAINIUM_DLAMI_SSM_PARAMETER,
)
from tests.support.cfn import as_list, flat

BOX_STACKS = (STACK_TRAINIUM, STACK_INFERENTIA)


def _resolver(outdir, parameters: dict[str, dict[str, str]] | None = None):
    from rehearsal.cfn import Resolver, load_assembly

    assembly = load_assembly(outdir)
    res = Resolver(assembly, parameters=parameters)
    for stack, iid in ((STACK_TRAINIUM, "i-0trn1"), (STACK_INFERENTIA, "i-0inf2")):
        (lid,) = assembly.template(stack).of_type("AWS::EC2::Instance")
        res.set_physical_id(stack, lid, iid)
    return assembly, res


# -- 1. the image id ------------------------------------------------------------------------------------------


def _image_ids(outdir, latest: str) -> dict[str, str]:
    """Each box's ImageId as CloudFormation takes it at a deploy where every SSM-typed template parameter (what
    CloudFormation re-reads at each stack update) resolves to ``latest``."""
    from rehearsal.cfn import load_assembly

    assembly = load_assembly(outdir)
    params = {
        t.stack_name: {n: latest for n, p in t.parameters.items() if "AWS::EC2::Image::Id" in p.get("Type", "")}
        for t in assembly
    }
    _, res = _resolver(outdir, params)
    out = {}
    for stack in BOX_STACKS:
        ((lid, instance),) = assembly.template(stack).of_type("AWS::EC2::Instance").items()
        out[stack] = res.resolve(stack, instance.properties["ImageId"], "Properties.ImageId", lid)
    return out


def test_a_new_dlami_on_deploy_day_cannot_change_the_boxes_image(synthesized):
    """The old template resolved an AWS::SSM::Parameter::Value<AWS::EC2::Image::Id> parameter: a deploy after
    AWS published a new DLAMI changed ImageId, and CloudFormation replaced the termination-protected box that holds
    the retained compile cache. Now the ImageId is a literal: a pin, or EC2's launch-time resolve:ssm: string."""
    for stack in BOX_STACKS:
        for name, p in synthesized.templates[stack].get("Parameters", {}).items():
            assert "AWS::EC2::Image::Id" not in p.get("Type", ""), (stack, name)
    before = _image_ids(synthesized.outdir, "ami-0aaaaaaaaaaaaaaaa")
    after = _image_ids(synthesized.outdir, "ami-0bbbbbbbbbbbbbbbb")
    assert before == after
    assert before[STACK_TRAINIUM] == f"resolve:ssm:{TRAINIUM_DLAMI_SSM_PARAMETER}"
    assert "pytorch-2.9" in before[STACK_TRAINIUM]  # the lanes' framework line, not the multi-framework "latest"
    assert before[STACK_INFERENTIA].startswith("ami-")


# -- 3. budget alerts reach someone ---------------------------------------------------------------------------


@pytest.fixture
def layer(tmp_path):
    deps = tmp_path / "lambda-deps"
    (deps / "python").mkdir(parents=True)
    (deps / "python" / "README.txt").write_text("stand-in for the Lambda dependency layer\n")
    return deps


def test_a_deploy_without_a_budget_subscriber_refuses_in_one_line_naming_the_setting(tmp_path, capsys, layer):
    """The deploy path (require_lambda_deps true, the layer built) with cdk.json's settings, which set no
    budget_alert_email: the SNS topic would have no subscriber. Synth refuses before writing a template."""
    from infra.app import CDK_JSON, main

    assert "budget_alert_email" not in json.loads(CDK_JSON.read_text())["context"]["neuronpipe"]
    rc = main(["--outdir", str(tmp_path / "out"), "--setting", f"lambda_deps_dir={layer}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("error: budget alerts would reach nobody") and "budget_alert_email" in err[0]
    assert '"none"' in err[0]
    assert not list((tmp_path / "out").glob("*.template.json"))


def _budget(built) -> tuple[list[str], str]:
    """The subscriber types of every notification, and what the BudgetAlertEmail output records."""
    notifications = built.base.budget.notifications_with_subscribers
    kinds = sorted({s.subscription_type for n in notifications for s in n.subscribers})
    output = built.base.node.find_child("BudgetAlertEmail")
    return kinds, str(output.value)


@pytest.fixture
def current_lock(tmp_path, monkeypatch):
    """A box lock written from box-requirements.txt as it is (its packages are not what this test checks)."""
    from infra import bundling
    from infra.box_lock import DIGEST_LINE, requirements_digest

    lock = tmp_path / "box-requirements.lock"
    lock.write_text(f"{DIGEST_LINE}{requirements_digest(bundling.BOX_REQUIREMENTS.read_text())}\n")
    monkeypatch.setattr(bundling, "BOX_LOCK", lock)
    return lock


def test_a_deploy_without_a_current_box_lock_refuses_in_one_line_naming_the_command(
    tmp_path, capsys, layer, monkeypatch
):
    """The boxes install only from the hashed lock: the deploy path refuses to synthesize without a current one."""
    from infra import bundling
    from infra.app import main

    monkeypatch.setattr(bundling, "BOX_LOCK", tmp_path / "no.lock")
    rc = main(
        [
            "--outdir",
            str(tmp_path / "out"),
            "--setting",
            f"lambda_deps_dir={layer}",
            "--setting",
            "budget_alert_email=none",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("error: box lock missing at") and "python -m infra.box_lock" in err[0]
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_the_explicit_opt_out_deploys_and_is_recorded(layer, monkeypatch, current_lock):
    import os

    from infra.app import build_app

    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    built = build_app(
        harness_sha="0" * 40, context={"neuronpipe": {"lambda_deps_dir": str(layer), "budget_alert_email": "none"}}
    )
    kinds, recorded = _budget(built)
    assert kinds == ["SNS"] and recorded.startswith("none (opted out")


def test_a_budget_email_is_subscribed_to_every_alert(redeploy):
    """The budget notifies the alert topic (every alarm does too); the address is the topic's subscriber."""
    res = redeploy[STACK_BASE]["Resources"]
    (topic,) = [k for k, r in res.items() if r["Type"] == "AWS::SNS::Topic"]
    (budget,) = [r for r in res.values() if r["Type"] == "AWS::Budgets::Budget"]
    for n in budget["Properties"]["NotificationsWithSubscribers"]:
        assert n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topic}}]
    (subscription,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SNS::Subscription"]
    assert subscription == {"Protocol": "email", "TopicArn": {"Ref": topic}, "Endpoint": "ops@example.com"}
    assert redeploy[STACK_BASE]["Outputs"]["BudgetAlertEmail"]["Value"] == "ops@example.com"


# -- 5. what a box may list and write ------------------------------------------------------------------------


def _box_decision(synthesized, role: str, action: str, key: str | None, prefix: str | None = None):
    """The box role's identity policy evaluated (rehearsal.iam) for one S3 request on the results bucket."""
    from rehearsal.iam import evaluate, iam_model

    assembly, res = _resolver(synthesized.outdir)
    actor = iam_model(assembly, res).actors[f"box:{role}"]
    bucket = next(
        res.physical_id(STACK_BASE, lid)
        for lid in assembly.template(STACK_BASE).of_type("AWS::S3::Bucket")
        if lid.startswith("Results")
    )
    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key else "")
    return evaluate(actor.statements, action, resource, {"s3:prefix": prefix} if action == "s3:ListBucket" else {})


def test_the_inf2_box_may_list_a_directory_adapter_and_trn1_may_not(synthesized):
    """A directory adapter URI s3://<bucket>/adapters/<prefix>/ is read by listing it: the ListBucket grant's
    s3:prefix condition allowed results/ only, so the listing was AccessDenied."""
    listing = _box_decision(synthesized, "inf2", "s3:ListBucket", None, "adapters/llama/my-adapter/")
    assert listing.allowed and listing.evaluated_conditions
    assert _box_decision(synthesized, "inf2", "s3:GetObject", "adapters/llama/my-adapter/adapter_config.json").allowed
    assert not _box_decision(synthesized, "trn1", "s3:ListBucket", None, "adapters/llama/").allowed
    assert not _box_decision(synthesized, "inf2", "s3:ListBucket", None, "reports/").allowed


@pytest.mark.parametrize("role", ["trn1", "inf2"])
def test_both_boxes_seed_from_and_push_to_the_shared_compile_cache(synthesized, role):
    key = "neuron-cache/neuronx-cc-2.26.1.0/neuronxcc-2.26/MODULE_abc/model.neff"
    assert _box_decision(synthesized, role, "s3:ListBucket", None, "neuron-cache/neuronx-cc-2.26.1.0/").allowed
    assert _box_decision(synthesized, role, "s3:GetObject", key).allowed
    assert _box_decision(synthesized, role, "s3:PutObject", key).allowed
    assert not _box_decision(synthesized, role, "s3:DeleteObject", key).allowed  # append-only


# -- 6. the bucket refuses an overwrite ------------------------------------------------------------------------


def _append_only_statement(template: dict[str, Any]) -> dict[str, Any]:
    policies = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::S3::BucketPolicy"]
    found = [
        st for p in policies for st in p["PolicyDocument"]["Statement"] if st.get("Sid") == "DenyOverwriteOfResults"
    ]
    assert len(found) == 1, found
    return found[0]


def _keys(statement: dict[str, Any]) -> list[str]:
    """The key patterns of the statement's resources (what follows the bucket's ARN or name)."""
    import re

    return sorted(re.search(r"(?:\}|-results-[^/]+)/(.+)$", flat(r)).group(1) for r in as_list(statement["Resource"]))


@pytest.mark.parametrize("variant", ["fresh", "imported"])
def test_a_put_without_if_none_match_is_denied_on_results_and_the_compile_cache(synthesized, redeploy, variant):
    """Never-overwritten was the client's promise only (the store's If-None-Match). The bucket now refuses any
    PutObject/CompleteMultipartUpload without it on the append-only keys, whoever sends it; multipart parts are
    exempt (they take no conditional header); results/logs/ is not covered (the SSM agent writes command output
    there without If-None-Match), nor reports/ and adapters/ (overwritten by design)."""
    template = synthesized.templates[STACK_BASE] if variant == "fresh" else redeploy[STACK_BASE]
    st = _append_only_statement(template)
    assert st["Effect"] == "Deny" and st["Principal"] == {"AWS": "*"} and st["Action"] == "s3:PutObject"
    assert st["Condition"] == {"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}}
    assert (
        _keys(st)
        == sorted(APPEND_ONLY_KEY_PATTERNS)
        == sorted(["results/v1/*", "results/models/*", "results/neuron-cache/*", "neuron-cache/*", "control/*"])
    )


def test_every_store_data_prefix_but_the_ssm_logs_is_append_only():
    from agents.compile_cache import CACHE_PREFIX
    from analytics.store.verify import DATA_PREFIXES

    covered = {p.removesuffix("*") for p in APPEND_ONLY_KEY_PATTERNS}
    for prefix in (*DATA_PREFIXES, f"{CACHE_PREFIX}/"):
        if prefix != "logs/":
            assert f"results/{prefix}" in covered, prefix
    assert "results/logs/" not in covered


# -- 7. network and logs --------------------------------------------------------------------------------------


def _nat_az(template: dict[str, Any]) -> str:
    resources = template["Resources"]
    (nat,) = [r for r in resources.values() if r["Type"] == "AWS::EC2::NatGateway"]
    return resources[nat["Properties"]["SubnetId"]["Ref"]]["Properties"]["AvailabilityZone"]


def test_the_nat_gateway_is_in_the_boxes_az(synthesized, redeploy):
    s = synthesized.settings
    assert s.trainium_az == s.inferentia_az == "us-west-2d" != s.availability_zones[0]  # CDK's default: the first
    assert _nat_az(synthesized.templates[STACK_BASE]) == s.trainium_az
    assert _nat_az(redeploy[STACK_BASE]) == "us-west-2d"  # boxes apart: trn1's AZ (inf2 here in us-west-2c)


def test_the_state_machine_log_holds_no_execution_data(synthesized):
    """At level ALL with includeExecutionData, every task's input went to CloudWatch Logs, and the SSM tasks'
    input carries their task token."""
    (machine,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::StepFunctions::StateMachine").values()
    logging = machine["Properties"]["LoggingConfiguration"]
    assert logging["IncludeExecutionData"] is False
    assert logging["Level"] in ("ALL", "ERROR", "FATAL")
