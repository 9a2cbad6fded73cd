"""IAM enforced in the rehearsal (issue 12 point 5): every actor calls AWS with a key bound to its synthesized
policy; the run passes with no denial; a call outside a box's policy fails the rehearsal naming action and actor.

One short rehearsal (the ``provenance`` lane, tiny profile) serves both tests; the negative one runs after the
positive one and only adds a call.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from control_plane.models import RunRequest
from rehearsal.iam import (
    Actor,
    Call,
    IamDeniedError,
    IamModel,
    IamRecorder,
    PolicyDoc,
    evaluate,
    request_checks,
    request_context,
    statements,
    unchecked,
)

RUN_ID = "rehearsal-iam-1"


def test_an_invoke_by_function_arn_is_checked_on_that_function() -> None:
    arn = "arn:aws:lambda:us-west-2:123456789012:function:Finalize-1"
    path = "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-west-2%3A123456789012%3Afunction%3AFinalize-1/invocations"
    assert request_checks("lambda:Invoke", "*", {}, b"{}", path, "us-west-2", "123456789012") == [
        ("lambda:InvokeFunction", arn)
    ]


LIST_RESULTS = PolicyDoc(
    "p",
    "test",
    {
        "Statement": [
            {
                "Sid": "ResultsList",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": "arn:aws:s3:::b",
                "Condition": {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}},
            }
        ]
    },
)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/b?list-type=2&prefix=results%2Fr1%2F", True),
        ("/b?list-type=2&prefix=reports%2F", False),  # AWS refuses a listing outside results/; so does the rehearsal
        ("/b", True),  # no s3:prefix at all: IfExists holds
    ],
)
def test_the_s3_prefix_of_a_listing_is_evaluated(path: str, allowed: bool) -> None:
    context = request_context("s3:ListBucket", path)
    d = evaluate(statements(LIST_RESULTS), "s3:ListBucket", "arn:aws:s3:::b", context)
    assert d.allowed is allowed and d.evaluated_conditions == ("p/ResultsList",) and not d.assumed_conditions
    assert evaluate(statements(LIST_RESULTS), "s3:ListBucket", "arn:aws:s3:::b").assumed_conditions == (
        "p/ResultsList",
    )  # without the request's context the condition is only assumed


def test_a_condition_evaluated_on_every_call_is_not_listed_as_unchecked() -> None:
    model = IamModel({"box:trn1": Actor("box:trn1", "box", "S/R", (LIST_RESULTS,))})
    rec = IamRecorder()
    assert any("p/ResultsList: condition not evaluated" in x for x in unchecked(model, rec))
    d = evaluate(statements(LIST_RESULTS), "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "results/x"})
    rec.record(Call("box:trn1", "s3:ListBucket", "arn:aws:s3:::b", True, "p/ResultsList"), None, d)
    assert not any("p/ResultsList" in x for x in unchecked(model, rec))


def test_the_actor_table_names_each_request_and_the_actions_iam_checked() -> None:
    from rehearsal.summary import actor_table

    rec = IamRecorder()
    rec.count_request("operator", "dynamodb:TransactWriteItems")
    rec.record(Call("operator", "dynamodb:PutItem", "t", True, "Admin", "dynamodb:TransactWriteItems"))
    rec.record(Call("operator", "dynamodb:PutItem", "t", True, "Admin", "dynamodb:TransactWriteItems"))
    for _ in range(2):
        rec.count_request("box:trn1", "s3:PutObject")
    rec.record(Call("box:trn1", "s3:PutObject", "a", True, "p/Results", "s3:PutObject"))
    rec.record(Call("box:trn1", "s3:PutObject", "b", False, None, "s3:PutObject"))
    assert actor_table(rec) == {
        "operator": ["dynamodb:TransactWriteItems x1 (dynamodb:PutItem)"],
        "box:trn1": ["s3:PutObject x2 DENIED"],
    }


def test_denials_fail_with_one_line_per_distinct_call() -> None:
    from rehearsal.run import IamDenialsError, RehearsalError

    d = IamDeniedError("box:trn1", "s3:PutObject", "arn:aws:s3:::b/reports/x", "S/Role")
    err = IamDenialsError([d, d, IamDeniedError("lambda:x", "ec2:StopInstances", None, "S/R2")])
    assert isinstance(err, RehearsalError) and len(err.denials) == 2
    assert "box:trn1 called s3:PutObject on arn:aws:s3:::b/reports/x" in str(err)
    assert "missing: Allow ec2:StopInstances on *" in str(err)


@pytest.fixture(scope="module")
def rehearsed(cfn_assembly, tmp_path_factory) -> Any:
    from rehearsal.run import Rehearsal

    r = Rehearsal(
        tmp_path_factory.mktemp("rehearsal-iam"), assembly=cfn_assembly, boot_delay_s=0.5, log=lambda _line: None
    )
    r.__enter__()
    try:
        launched = r.start(RunRequest(lanes=["provenance"], profile="tiny", trigger="rehearsal-iam"), RUN_ID)
        final = r.follow(launched.execution_arn, lambda _p: None, deadline_s=600)
        r.settle()
        yield {"r": r, "final": final, "arn": launched.execution_arn}
    finally:
        r._close()  # the tests check the denials themselves (leaving the context would raise on them)


@pytest.mark.slow
def test_the_run_passes_with_every_actor_on_its_own_policy(rehearsed: dict[str, Any], capsys) -> None:
    from rehearsal.summary import iam_lines

    r = rehearsed["r"]
    assert rehearsed["final"].status == "SUCCEEDED", rehearsed["final"]
    assert r.running_boxes() == []
    # plan_run, as a console/CLI trigger would invoke it, for the run that already ran: its calls are enforced
    answer = r.world.client("lambda", r.operator()).invoke(
        FunctionName=r.deployment.functions["plan_run"].arn,
        Payload=json.dumps({"lanes": ["provenance"], "profile": "tiny", "run_id": RUN_ID}),
    )
    outcome = json.loads(answer["Payload"].read())
    assert outcome.get("outcome") in ("duplicate", "refused"), outcome
    with capsys.disabled():
        print("\n" + "\n".join(iam_lines(r)), flush=True)
    assert [str(d) for d in r.iam_denials()] == []
    r.raise_if_denied()
    table = r.iam.table()
    machine = next(a for a in table if a.startswith("state-machine:"))
    for actor, action in [
        ("box:trn1", "s3:PutObject"),
        ("box:trn1", "states:SendTaskSuccess"),
        (machine, "ec2:StartInstances"),
        (machine, "ec2:StopInstances"),
        (machine, "ssm:SendCommand"),
        (machine, "dynamodb:DeleteItem"),
        ("operator", "states:StartExecution"),
    ]:
        assert table.get(actor, {}).get(action, 0) >= 1, f"{actor} never called {action}: {table.get(actor)}"
    assert r.iam.requests[("operator", "dynamodb:TransactWriteItems")] >= 1
    # each actor called with its own key: the Lambdas and the boxes appear under their own names
    assert any(a.startswith("lambda:") for a in table)
    assert not any(a == "rehearsal" and k.startswith("states:SendTask") for a in table for k in table[a])
    assert sum(n for (a, _), n in r.iam.requests.items() if a == "lambda:plan_run") >= 1
    # the static checks ran and found every call granted: the ASL's Tasks, what AWS calls with the roles
    assert r.iam_static and all(d.allowed for _, d in r.iam_static)
    assert {c.action for c, _ in r.iam_service} >= {"logs:PutLogEvents", "ssm:UpdateInstanceInformation"}
    assert all(d.allowed for _, d in r.iam_service)


@pytest.mark.slow
def test_a_box_cannot_commit_for_another_lane_or_run_nor_write_control_data(rehearsed: dict[str, Any]) -> None:
    """With a box's own credentials: a commit marker for another run or another lane of its run, and a control
    object, are denied by its policy; a proposal it may write for another lane never becomes an attempt (only the
    control plane commits, and only what a lane's own callback names). The run's own results stand."""
    from botocore.exceptions import ClientError

    from analytics.store import S3Store

    r = rehearsed["r"]
    box = next(b for b in r.boxes.values() if b.identity.box_role == "trn1")
    results = r.settings().results_uri
    bucket, _, root = results.removeprefix("s3://").partition("/")
    s3 = r.world.client("s3", box.credentials())
    marker = b'{"forged": true}'
    for key in (
        f"{root}/v1/_commits/run_id=another-run/lane=smoke@trn1/s00000001-forged.json",
        f"{root}/v1/_commits/run_id={RUN_ID}/lane=provenance@inf2/s00000009-forged.json",
        f"{root}/v1/_quarantine/run_id={RUN_ID}/lane=provenance@trn1/s00000001-x.json",
        f"control/{RUN_ID}/plan.json",
        "control/another-run/wave-0/items.json",
    ):
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.put_object(Bucket=bucket, Key=key, Body=marker, IfNoneMatch="*")
    # a proposal is the box's to write; it commits nothing
    s3.put_object(
        Bucket=bucket,
        Key=f"{root}/v1/_proposed/run_id={RUN_ID}/lane=provenance@inf2/s00000009-f.json",
        Body=marker,
        IfNoneMatch="*",
    )
    store = S3Store(results, client=r.world.client("s3", r.operator()))
    attempts = {(m.lane, m.attempt) for m in store.usable_markers() if m.run_id == RUN_ID}
    assert {lane for lane, _ in attempts} >= {"provenance@trn1", "provenance@inf2"}
    assert not any(a.endswith("-f") or "forged" in a for _, a in attempts)
    assert not [m for m in store.usable_markers() if m.run_id == "another-run"]
    denied = {(d.actor, d.resource.rsplit("/", 3)[-3] if d.resource else "") for d in r.iam_denials()}
    assert all(actor == "box:trn1" for actor, _ in denied) and len(r.iam_denials()) >= 5


@pytest.mark.slow
def test_a_call_outside_the_box_policy_fails_the_rehearsal(rehearsed: dict[str, Any]) -> None:
    from rehearsal.run import IamDenialsError

    r = rehearsed["r"]
    box = next(b for b in r.boxes.values() if b.identity.box_role == "trn1")
    bucket = r.settings().results_uri.removeprefix("s3://").split("/", 1)[0]
    # the box's own CLI, credentials from its loopback IMDS: the reports/ prefix is the finalize Lambda's
    proc = subprocess.run(
        ["aws", "s3", "cp", "-", f"s3://{bucket}/reports/{RUN_ID}/forged.md"],
        input="x",
        env=box.agent_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "AccessDenied" in proc.stderr, proc.stderr
    # leaving the rehearsal raises it (`neuronpipe rehearse` prints it and exits 1)
    with pytest.raises(
        IamDenialsError,
        match=r"box:trn1 called s3:PutObject on arn:aws:s3:::[^ ]+/reports/"
        r".*no statement of its role .* allows it \(missing: Allow "
        r"s3:PutObject on arn:aws:s3:::",
    ):
        r.__exit__(None, None, None)
