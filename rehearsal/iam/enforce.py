"""IAM enforced in moto: one IAM user per actor holding its role's documents, and moto's request authentication
turned on with its policy evaluation replaced by the rehearsal's.

:func:`provision` creates one moto IAM user per actor with the same documents as inline user policies, and an access
key. :class:`IamEnforcement` turns moto's request authentication on (moto's ``INITIAL_NO_AUTH_ACTION_COUNT`` -> 0,
read in-process by ``ActionAuthenticatorMixin``: the moto server must run in this process, e.g.
``ThreadedMotoServer``) and replaces the policy evaluation of ``IAMRequestBase`` (moto checks signatures and keys
itself, then passes ``Resource "*"`` for every service but S3, so a resource-scoped statement could never match) by
``rehearsal.iam.evaluate.evaluate`` against the resource derived from the request where it can be derived. Every
(actor, action, resources, allowed) is recorded (:class:`IamRecorder`); a denial answers AccessDenied and is kept as
an ``IamDeniedError``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rehearsal.iam.evaluate import Decision, IamDeniedError, evaluate
from rehearsal.iam.model import IamModel, IamModelError
from rehearsal.iam.requests import request_checks, request_context

MOTO_SFN_KEY = ("ak", "sk")  # moto.stepfunctions.parser.asl.utils.boto_client signs with these


@dataclass(frozen=True)
class AccessKey:
    actor: str
    user_name: str
    access_key_id: str
    secret_access_key: str

    def env(self) -> dict[str, str]:
        """Environment for a process acting as this actor (no session token: moto refuses one on a user key)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}

    def session(self, region: str) -> Any:
        import boto3

        return boto3.Session(
            aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key, region_name=region
        )


def provision(
    model: IamModel, iam: Any, *, fixed_keys: Mapping[str, tuple[str, str]] | None = None, account: str = "123456789012"
) -> dict[str, AccessKey]:
    """One moto IAM user per actor with its documents as inline policies, and an access key. Call before
    enforcement is on (or with the operator's key).

    ``fixed_keys``: actor -> (key id, secret) to give that actor instead of a generated key, e.g.
    ``{"state-machine:<name>": MOTO_SFN_KEY}``: moto's ASL interpreter signs the state machine's ``aws-sdk``
    and service-integration calls with that key when it runs against a server, so they are enforced as the
    state machine's role. Rewriting a key reaches into moto's IAM backend: the server must run in this process.
    """
    keys = {}
    for actor in model.actors.values():
        iam.create_user(UserName=actor.user_name, Tags=[{"Key": "neuronpipe:actor", "Value": actor.name}])
        for i, doc in enumerate(actor.policies):
            iam.put_user_policy(
                UserName=actor.user_name,
                PolicyName=f"{i:02d}-{doc.name}"[:128],
                PolicyDocument=json.dumps(doc.document),
            )
        k = iam.create_access_key(UserName=actor.user_name)["AccessKey"]
        key_id, secret = k["AccessKeyId"], k["SecretAccessKey"]
        if actor.name in (fixed_keys or {}):
            key_id, secret = _rekey(account, actor.user_name, key_id, *(fixed_keys or {})[actor.name])
        keys[actor.name] = AccessKey(actor.name, actor.user_name, key_id, secret)
    return keys


def _rekey(account: str, user_name: str, old: str, new_id: str, new_secret: str) -> tuple[str, str]:
    from moto.iam.models import iam_backends

    for key in iam_backends[account]["aws"].get_user(user_name).access_keys:
        if key.access_key_id == old:
            key.access_key_id, key.secret_access_key = new_id, new_secret
            return new_id, new_secret
    raise IamModelError(f"access key {old} of {user_name} not found in moto's IAM backend (server not in-process?)")


@dataclass(frozen=True)
class Call:
    actor: str
    action: str  # "service:Action" as IAM names it
    resource: str | None  # None: not derivable from the request (action-only check)
    allowed: bool
    statement: str | None  # the statement that allowed (or denied) it
    api: str = ""  # the request as moto names it ("dynamodb:TransactWriteItems"), when known


class IamRecorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.denials: list[IamDeniedError] = []
        self.requests: Counter[tuple[str, str]] = Counter()  # (actor, api) -> requests made
        self.conditions_evaluated: Counter[tuple[str, str]] = Counter()  # (actor, statement) -> checks evaluating it
        self.conditions_assumed: Counter[tuple[str, str]] = Counter()  # (actor, statement) -> checks assuming it
        self._lock = threading.Lock()

    def count_request(self, actor: str, api: str) -> None:
        with self._lock:
            self.requests[(actor, api)] += 1

    def record(self, call: Call, denial: IamDeniedError | None = None, decision: Decision | None = None) -> None:
        with self._lock:
            self.calls.append(call)
            if decision is not None:
                self.conditions_evaluated.update((call.actor, c) for c in decision.evaluated_conditions)
                self.conditions_assumed.update((call.actor, c) for c in decision.assumed_conditions)
            if denial is not None:
                self.denials.append(denial)

    def table(self) -> dict[str, Counter[str]]:
        """actor -> Counter of actions it called (denied ones suffixed " DENIED")."""
        out: dict[str, Counter[str]] = {}
        for c in list(self.calls):
            out.setdefault(c.actor, Counter())[c.action + ("" if c.allowed else " DENIED")] += 1
        return out

    def raise_if_denied(self) -> None:
        if self.denials:
            raise self.denials[0]


class IamEnforcement:
    """Context manager: moto's authentication on, each request evaluated against its actor's statements."""

    def __init__(self, model: IamModel, keys: Mapping[str, AccessKey], recorder: IamRecorder | None = None):
        self.model, self.recorder = model, recorder or IamRecorder()
        self._actor_by_user = {k.user_name: model.actors[a] for a, k in keys.items()}
        self._stack: list[Any] = []

    def _check(self, original: Any) -> Any:
        def check_action_permitted(req: Any, resource: str) -> None:
            actor = self._actor_by_user.get(getattr(req._access_key, "_owner_user_name", None))
            if actor is None or req._action == "sts:GetCallerIdentity":
                return original(req, resource)
            self.recorder.count_request(actor.name, req._action)
            for action, res in request_checks(
                req._action, resource, req._data, req._body, req._path, req._region, req.account_id
            ):
                d = evaluate(actor.statements, action, res, request_context(action, req._path))
                denial = None if d.allowed else IamDeniedError(actor.name, action, res, actor.role, d.denied_by)
                self.recorder.record(
                    Call(actor.name, action, res, d.allowed, d.allowed_by or d.denied_by, req._action), denial, d
                )
                if denial is not None:
                    _raise_denied(req, str(denial))

        return check_action_permitted

    def __enter__(self) -> IamEnforcement:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin
        from moto.iam.access_control import IAMRequestBase

        self._stack.append(
            (
                IAMRequestBase.check_action_permitted,
                settings.INITIAL_NO_AUTH_ACTION_COUNT,
                ActionAuthenticatorMixin.request_count,
            )
        )
        IAMRequestBase.check_action_permitted = self._check(IAMRequestBase.check_action_permitted)
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        ActionAuthenticatorMixin.request_count = 0
        return self

    def __exit__(self, *exc: object) -> None:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin
        from moto.iam.access_control import IAMRequestBase

        check, count, requests = self._stack.pop()
        IAMRequestBase.check_action_permitted = check
        settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = count, requests


def _raise_denied(req: Any, message: str) -> None:
    from moto.core.exceptions import JsonRESTError

    if req._service in ("s3", "ec2", "sts", "iam"):  # XML protocols: moto's own error shapes
        req._raise_access_denied()
    raise JsonRESTError("AccessDeniedException", message)


@contextmanager
def enforced(model: IamModel, keys: Mapping[str, AccessKey]) -> Iterator[IamRecorder]:
    with IamEnforcement(model, keys) as enforcement:
        yield enforcement.recorder
