"""IAM enforced per actor: the synthesized roles' policies, bound to credentials in moto, every call recorded.

Actors: each box (its instance profile's role), each Lambda (its execution role), the state machine (its role),
and ``operator`` (admin). The package, one job a module:

* :mod:`rehearsal.iam.evaluate`: policy statements and IAM's identity-policy logic (:func:`evaluate`);
* :mod:`rehearsal.iam.requests`: the actions and resources AWS would evaluate for one request, and its condition
  keys;
* :mod:`rehearsal.iam.model`: the actors and their documents, read from the templates (:func:`iam_model`);
* :mod:`rehearsal.iam.enforce`: one moto IAM user per actor (:func:`provision`) and moto's request authentication
  turned on with the rehearsal's evaluation (:class:`IamEnforcement`), every call recorded (:class:`IamRecorder`);
* :mod:`rehearsal.iam.asl_calls`: the state machine's own calls, checked statically from the ASL, every branch
  (:func:`check_state_machine`);
* :mod:`rehearsal.iam.unchecked`: what neither moto nor the enforcement checks (:func:`unchecked`).

Conditions are evaluated where the request carries their keys (string operators), else assumed to hold and listed
(moto evaluates none). The state machine's own calls: moto's ASL interpreter sends them to the server signed with a
fixed key (:data:`MOTO_SFN_KEY`), which :func:`provision` binds to the state machine's actor.
"""

from __future__ import annotations

from rehearsal.iam.asl_calls import AslCall, asl_calls, check_state_machine, state_machine_denials
from rehearsal.iam.enforce import MOTO_SFN_KEY, AccessKey, Call, IamEnforcement, IamRecorder, enforced, provision
from rehearsal.iam.evaluate import Decision, IamDeniedError, PolicyDoc, Statement, evaluate, statements
from rehearsal.iam.model import ADMIN_POLICY, Actor, IamModel, IamModelError, aws_managed_policy, iam_model
from rehearsal.iam.requests import ACTION_ALIASES, request_checks, request_context
from rehearsal.iam.unchecked import unchecked

__all__ = [
    "ACTION_ALIASES",
    "ADMIN_POLICY",
    "MOTO_SFN_KEY",
    "AccessKey",
    "Actor",
    "AslCall",
    "Call",
    "Decision",
    "IamDeniedError",
    "IamEnforcement",
    "IamModel",
    "IamModelError",
    "IamRecorder",
    "PolicyDoc",
    "Statement",
    "asl_calls",
    "aws_managed_policy",
    "check_state_machine",
    "enforced",
    "evaluate",
    "iam_model",
    "provision",
    "request_checks",
    "request_context",
    "state_machine_denials",
    "statements",
    "unchecked",
]
