"""IAM enforced per actor: the synthesized roles' policies, bound to credentials in moto, every call recorded.

Actors: each box (its instance profile's role), each Lambda (its execution role), the state machine (its role),
and ``operator`` (admin). :func:`iam_model` reads their policy documents from the templates (inline ``Policies``,
``AWS::IAM::Policy``/``ManagedPolicy`` attached through ``Roles``, ``ManagedPolicyArns`` incl. AWS managed ones
from moto's copy). :func:`provision` creates one moto IAM user per actor with the same documents as inline user
policies, and an access key. :class:`IamEnforcement` turns moto's request authentication on (moto's
``INITIAL_NO_AUTH_ACTION_COUNT`` -> 0, read in-process by ``ActionAuthenticatorMixin``: the moto server must run in
this process, e.g. ``ThreadedMotoServer``) and replaces the policy evaluation of ``IAMRequestBase`` (moto checks
signatures and keys itself, then passes ``Resource "*"`` for every service but S3, so a resource-scoped statement
could never match) by :func:`evaluate` against the resource derived from the request where it can be derived.
Every (actor, action, resources, allowed) is recorded; a denial answers AccessDenied and is kept as an
:class:`IamDeniedError`. Conditions are not evaluated (nor by moto): :func:`unchecked` lists them with everything
else neither checks. The state machine's own calls: moto's ASL interpreter sends them to the server signed with
a fixed key (:data:`MOTO_SFN_KEY`), which :func:`provision` binds to the state machine's actor; they are also
checked statically from the ASL, every branch (:func:`check_state_machine`).
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from rehearsal.cfn import Assembly, Resolver, TemplateResolveError

ADMIN_POLICY = {"Version": "2012-10-17", "Statement": [{"Sid": "Admin", "Effect": "Allow", "Action": "*",
                                                        "Resource": "*"}]}
# moto's action name -> the IAM action AWS evaluates
ACTION_ALIASES = {"s3:HeadBucket": "s3:ListBucket", "s3:ListObjects": "s3:ListBucket",
                  "s3:ListObjectsV2": "s3:ListBucket", "s3:CreateMultipartUpload": "s3:PutObject",
                  "s3:UploadPart": "s3:PutObject", "s3:CompleteMultipartUpload": "s3:PutObject",
                  "s3:DeleteObjects": "s3:DeleteObject", "lambda:Invoke": "lambda:InvokeFunction"}
SDK_SERVICE_PREFIX = {"sfn": "states", "eventbridge": "events", "cloudwatchlogs": "logs"}


class IamModelError(Exception):
    """The templates' IAM could not be read into actors."""


class IamDeniedError(Exception):
    """An actor called an action no statement of its role allows (or one denies)."""

    def __init__(self, actor: str, action: str, resource: str | None, role: str, denied_by: str | None = None):
        target = resource or "a resource the rehearsal cannot name"
        why = (f"statement {denied_by} denies it" if denied_by else
               f"no statement of its role {role} allows it (missing: Allow {action} on {resource or '*'})")
        super().__init__(f"AccessDenied: {actor} called {action} on {target}: {why}")
        self.actor, self.action, self.resource, self.role, self.denied_by = actor, action, resource, role, denied_by


# --- policies and their evaluation -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PolicyDoc:
    name: str
    source: str  # "<stack>/<logical id>" or "aws-managed:<name>" or "operator"
    document: dict[str, Any]


@dataclass(frozen=True)
class Statement:
    label: str
    effect: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    condition: dict[str, Any] = field(default_factory=dict)


def _tuple(v: Any) -> tuple[str, ...]:
    return tuple(v) if isinstance(v, list) else (v,) if v is not None else ()


def statements(doc: PolicyDoc) -> list[Statement]:
    raw = doc.document.get("Statement", [])
    out = []
    for i, s in enumerate(raw if isinstance(raw, list) else [raw]):
        out.append(Statement(f"{doc.name}/{s.get('Sid') or i}", s["Effect"], _tuple(s.get("Action")),
                             _tuple(s.get("NotAction")), _tuple(s.get("Resource")), _tuple(s.get("NotResource")),
                             dict(s.get("Condition", {}))))
    return out


def _like(pattern: str, value: str, fold: bool) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if fold else 0) is not None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    allowed_by: str | None = None
    denied_by: str | None = None
    assumed_conditions: tuple[str, ...] = ()  # labels of matching statements whose Condition was not evaluated
    evaluated_conditions: tuple[str, ...] = ()  # labels of statements whose Condition was evaluated from context


def _condition_holds(condition: Mapping[str, Any], context: Mapping[str, str | None]) -> bool | None:
    """Whether a Condition holds for the request's context keys (a None value: the key is absent); None when
    it cannot be evaluated here (an operator other than String{Equals,Like}[IfExists], or a key not in context)."""
    results = []
    for op, spec in condition.items():
        base = op.removesuffix("IfExists")
        if base not in ("StringEquals", "StringLike") or not isinstance(spec, Mapping):
            return None
        for key, patterns in spec.items():
            if key not in context:
                return None
            value = context[key]
            if value is None:
                results.append(op.endswith("IfExists"))
            else:
                pats = patterns if isinstance(patterns, list) else [patterns]
                results.append(any(p == value if base == "StringEquals" else _like(p, value, False) for p in pats))
    return all(results)


def evaluate(stmts: Iterable[Statement], action: str, resource: str | None,
             context: Mapping[str, str | None] | None = None) -> Decision:
    """IAM's identity-policy logic: an explicit Deny wins, else any Allow. ``resource=None``: action-only check.

    Actions match case-insensitively with ``*``/``?`` wildcards, resources case-sensitively. A Condition is
    evaluated when every key it names is in ``context`` (string operators only, e.g. ``s3:prefix`` of a list
    request); otherwise it is assumed to hold (listed in the decision).
    """
    allow, deny, assumed, evaluated = None, None, [], []
    for s in stmts:
        if s.actions and not any(_like(p, action, True) for p in s.actions):
            continue
        if s.not_actions and any(_like(p, action, True) for p in s.not_actions):
            continue
        if resource is not None:
            if s.resources and not any(_like(p, resource, False) for p in s.resources):
                continue
            if s.not_resources and any(_like(p, resource, False) for p in s.not_resources):
                continue
        if s.condition:
            held = _condition_holds(s.condition, context or {})
            if held is None:
                assumed.append(s.label)
            else:
                evaluated.append(s.label)
                if not held:
                    continue
        if s.effect == "Deny":
            deny = deny or s.label
        elif s.effect == "Allow":
            allow = allow or s.label
    return Decision(deny is None and allow is not None, allow, deny, tuple(assumed), tuple(evaluated))


def request_context(action: str, path: str) -> dict[str, str | None]:
    """The condition keys the rehearsal can read from a request: ``s3:prefix`` of a bucket listing."""
    if action == "s3:ListBucket":
        prefix = parse_qs(urlparse(path).query, keep_blank_values=True).get("prefix")
        return {"s3:prefix": prefix[0] if prefix else None}
    return {}


# --- actors from the templates -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Actor:
    name: str          # "box:trn1", "box:fleet" (every ephemeral box), "lambda:plan_run", "state-machine:<name>",
    #                    "operator"
    kind: str          # "box" | "lambda" | "state_machine" | "operator"
    role: str          # "<stack>/<role logical id>" ("operator" for the operator)
    policies: tuple[PolicyDoc, ...]

    @property
    def statements(self) -> list[Statement]:
        return [s for p in self.policies for s in statements(p)]

    @property
    def user_name(self) -> str:
        return "np-" + re.sub(r"[^\w+=,.@-]", "-", self.name)[:60]


@dataclass
class IamModel:
    actors: dict[str, Actor]
    notes: list[str] = field(default_factory=list)  # what the model could not include, and resource policies


def aws_managed_policy(name: str) -> dict[str, Any] | None:
    """The document of an AWS managed policy as moto ships it (None when moto does not know it)."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    entry = json.loads(aws_managed_policies_data).get(name)
    return entry["Document"] if entry else None


def iam_model(assembly: Assembly, resolver: Resolver, *, operator: bool = True) -> IamModel:
    """Every actor of the assembly with the policy documents its role holds, intrinsics resolved."""
    notes: list[str] = []
    roles: dict[str, list[PolicyDoc]] = {}   # "<stack>/<lid>" -> docs
    by_name: dict[str, str] = {}             # role name -> "<stack>/<lid>"
    managed: dict[str, PolicyDoc] = {}       # customer managed policy ARN -> doc
    for tpl in assembly:
        s = tpl.stack_name
        for lid in tpl.of_type("AWS::IAM::Role"):
            key = f"{s}/{lid}"
            by_name[resolver.physical_id(s, lid)] = key
            try:
                props = resolver.properties(s, lid)
            except TemplateResolveError as exc:
                notes.append(f"role {key} not modelled (its actor is not rehearsed): {exc}")
                continue
            roles[key] = [PolicyDoc(p["PolicyName"], key, p["PolicyDocument"]) for p in props.get("Policies", [])]
            for arn in props.get("ManagedPolicyArns", []):
                m = re.fullmatch(r"arn:[\w-]+:iam::aws:policy/(?:.*/)?([^/]+)", arn)
                doc = aws_managed_policy(m.group(1)) if m else None
                if doc is not None:
                    roles[key].append(PolicyDoc(m.group(1), f"aws-managed:{m.group(1)}", doc))
                elif not m:
                    roles[key].append(PolicyDoc(arn, f"managed:{arn}", {}))  # filled below
                else:
                    notes.append(f"role {key}: AWS managed policy {arn} unknown to moto: not enforced")
        for lid in [*tpl.of_type("AWS::IAM::ManagedPolicy"), *tpl.of_type("AWS::IAM::Policy")]:
            props = resolver.properties(s, lid)
            doc = PolicyDoc(props.get("PolicyName") or props.get("ManagedPolicyName") or lid, f"{s}/{lid}",
                            props["PolicyDocument"])
            if tpl.resources[lid].type == "AWS::IAM::ManagedPolicy":
                managed[str(resolver.physical_id(s, lid))] = doc
            for role_name in props.get("Roles", []):
                if by_name.get(role_name) in roles:
                    roles[by_name[role_name]].append(doc)
    for docs in roles.values():
        docs[:] = [managed.get(d.name, d) if d.source.startswith("managed:") else d for d in docs]

    def role_of(arn_or_name: str) -> str:
        key = by_name.get(str(arn_or_name).rsplit("/", 1)[-1])
        if key is None or key not in roles:
            raise IamModelError(f"role {arn_or_name} is not a modelled role of the assembly")
        return key

    actors: dict[str, Actor] = {}

    def add(name: str, kind: str, role_ref: Any, where: str) -> None:
        try:
            key = role_of(role_ref)
        except IamModelError as exc:
            notes.append(f"{name} ({where}) not rehearsed: {exc}")
            return
        actors[name] = Actor(name, kind, key, tuple(roles[key]))

    for tpl in assembly:
        s = tpl.stack_name
        for lid, res in tpl.of_type("AWS::Lambda::Function").items():
            handler = str(resolver.resolve(s, res.properties.get("Handler", ""), where=lid))
            name = handler.rsplit(".", 2)[-2] if handler.startswith("control_plane.handlers.") else lid
            add(f"lambda:{name}", "lambda", _resolve_or(resolver, s, res.properties.get("Role"), lid), f"{s}/{lid}")
        for lid, res in tpl.of_type("AWS::StepFunctions::StateMachine").items():
            name = resolver.resolve(s, res.properties.get("StateMachineName", lid), where=lid)
            add(f"state-machine:{name}", "state_machine", _resolve_or(resolver, s, res.properties.get("RoleArn"),
                                                                      lid), f"{s}/{lid}")
        for lid, res in tpl.of_type("AWS::EC2::Instance").items():
            tags = {t["Key"]: t["Value"] for t in resolver.resolve(s, res.properties.get("Tags", []), where=lid)}
            profile = str(resolver.resolve(s, res.properties.get("IamInstanceProfile", ""), where=lid))
            prof_lid = next((p for p in tpl.of_type("AWS::IAM::InstanceProfile")
                             if resolver.physical_id(s, p) == profile), None)
            role_names = resolver.properties(s, prof_lid).get("Roles", []) if prof_lid else []
            add(f"box:{tags.get('neuronpipe:role', s)}", "box", role_names[0] if role_names else profile,
                f"{s}/{lid}")
        for lid, res in tpl.of_type("AWS::EC2::LaunchTemplate").items():  # the fleet's ephemeral boxes: one role
            profile = ((res.properties.get("LaunchTemplateData") or {}).get("IamInstanceProfile") or {}).get("Arn")
            prof_lid = profile["Fn::GetAtt"][0] if isinstance(profile, dict) and "Fn::GetAtt" in profile else None
            roles_of = tpl.resources[prof_lid].properties.get("Roles", []) if prof_lid in tpl.resources else []
            role_lid = roles_of[0].get("Ref") if roles_of and isinstance(roles_of[0], dict) else None
            if role_lid is None:
                notes.append(f"launch template {s}/{lid}: no instance profile of its stack; its boxes not rehearsed")
            elif "box:fleet" not in actors:
                add("box:fleet", "box", resolver.physical_id(s, role_lid), f"{s}/{lid}")
        for lid, res in tpl.of_type("AWS::Lambda::Permission").items():
            notes.append(f"resource-based policy {s}/{lid} ({res.properties.get('Principal')} may invoke a "
                         "function): not evaluated, the rehearsal invokes Lambdas in-process")
        for kind in ("AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy"):
            notes.extend(f"resource-based policy {s}/{lid} ({kind}): not evaluated (moto's IAM enforcement "
                         "reads identity policies only)" for lid in tpl.of_type(kind))
    if operator:
        actors["operator"] = Actor("operator", "operator", "operator", (PolicyDoc("Admin", "operator",
                                                                                  ADMIN_POLICY),))
    return IamModel(actors, notes)


def _resolve_or(resolver: Resolver, stack: str, value: Any, lid: str) -> str:
    try:
        return str(resolver.resolve(stack, value, where=lid))
    except TemplateResolveError as exc:
        return f"<unresolvable: {exc}>"


# --- moto: users, keys, enforcement, the record ------------------------------------------------------------------

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

        return boto3.Session(aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key,
                             region_name=region)


def provision(model: IamModel, iam: Any, *, fixed_keys: Mapping[str, tuple[str, str]] | None = None,
              account: str = "123456789012") -> dict[str, AccessKey]:
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
            iam.put_user_policy(UserName=actor.user_name, PolicyName=f"{i:02d}-{doc.name}"[:128],
                                PolicyDocument=json.dumps(doc.document))
        k = iam.create_access_key(UserName=actor.user_name)["AccessKey"]
        key_id, secret = k["AccessKeyId"], k["SecretAccessKey"]
        if actor.name in (fixed_keys or {}):
            key_id, secret = _rekey(account, actor.user_name, key_id, *(fixed_keys or {})[actor.name])
        keys[actor.name] = AccessKey(actor.name, actor.user_name, key_id, secret)
    return keys


MOTO_SFN_KEY = ("ak", "sk")  # moto.stepfunctions.parser.asl.utils.boto_client signs with these


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
    action: str               # "service:Action" as IAM names it
    resource: str | None      # None: not derivable from the request (action-only check)
    allowed: bool
    statement: str | None     # the statement that allowed (or denied) it
    api: str = ""             # the request as moto names it ("dynamodb:TransactWriteItems"), when known


class IamRecorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.denials: list[IamDeniedError] = []
        self.requests: Counter[tuple[str, str]] = Counter()  # (actor, api) -> requests made
        self.conditions_evaluated: Counter[tuple[str, str]] = Counter()  # (actor, statement) -> checks evaluating it
        self.conditions_assumed: Counter[tuple[str, str]] = Counter()    # (actor, statement) -> checks assuming it
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


def request_checks(action: str, resource: str, data: Mapping[str, Any], body: bytes | None, path: str,
                   region: str, account: str) -> list[tuple[str, str | None]]:
    """(IAM action, resource ARN or None) pairs AWS would evaluate for one request moto authenticated."""
    action = ACTION_ALIASES.get(action, action)
    if resource != "*":
        return [(action, resource)]
    service, name = action.split(":", 1)
    try:
        p = json.loads(body) if body and body.lstrip()[:1] == b"{" else {}
    except ValueError:
        p = {}

    def arn(svc: str, rest: str, acct: str = account) -> str:
        return f"arn:aws:{svc}:{region}:{acct}:{rest}"

    if service == "ec2":
        ids = [v[0] if isinstance(v, list) else v for k, v in data.items() if k.startswith("InstanceId.")]
        return [(action, arn("ec2", f"instance/{i}")) for i in ids] or [(action, None)]
    if service == "states":
        for key in ("stateMachineArn", "executionArn"):
            if key in p:
                return [(action, p[key])]
    if service == "ssm" and name == "SendCommand":
        doc = p.get("DocumentName", "")
        doc_arn = arn("ssm", f"document/{doc}", "" if doc.startswith("AWS-") else account)
        return [(action, doc_arn)] + [(action, arn("ec2", f"instance/{i}")) for i in p.get("InstanceIds", [])]
    if service == "ssm" and "Name" in p and name.startswith(("GetParameter", "PutParameter")):
        return [(action, arn("ssm", f"parameter/{p['Name'].lstrip('/')}"))]
    if service == "ssm" and "Names" in p:
        return [(action, arn("ssm", f"parameter/{n.lstrip('/')}")) for n in p["Names"]]
    if service == "dynamodb" and name in ("TransactWriteItems", "TransactGetItems"):
        verbs = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck":
                 "ConditionCheckItem", "Get": "GetItem"}
        return [(f"dynamodb:{verbs[op]}", arn("dynamodb", f"table/{spec['TableName']}"))
                for item in p.get("TransactItems", []) for op, spec in item.items()]
    if service == "dynamodb" and "TableName" in p:
        return [(action, arn("dynamodb", f"table/{p['TableName']}"))]
    if service == "events" and name == "PutEvents":
        buses = {e.get("EventBusName", "default") for e in p.get("Entries", [])} or {"default"}
        return [(action, b if b.startswith("arn:") else arn("events", f"event-bus/{b}")) for b in sorted(buses)]
    if service == "lambda" and (m := re.search(r"/functions/([^/]+)", path)):
        fn = unquote(m.group(1))  # boto3 sends an ARN as FunctionName URL-encoded in the path
        return [(action, fn if fn.startswith("arn:") else arn("lambda", f"function:{fn}"))]
    if service == "secretsmanager" and str(p.get("SecretId", "")).startswith("arn:"):
        return [(action, p["SecretId"])]
    return [(action, None)]


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
            for action, res in request_checks(req._action, resource, req._data, req._body, req._path,
                                              req._region, req.account_id):
                d = evaluate(actor.statements, action, res, request_context(action, req._path))
                denial = None if d.allowed else IamDeniedError(actor.name, action, res, actor.role, d.denied_by)
                self.recorder.record(Call(actor.name, action, res, d.allowed, d.allowed_by or d.denied_by,
                                          req._action), denial, d)
                if denial is not None:
                    _raise_denied(req, str(denial))
        return check_action_permitted

    def __enter__(self) -> IamEnforcement:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin
        from moto.iam.access_control import IAMRequestBase

        self._stack.append((IAMRequestBase.check_action_permitted, settings.INITIAL_NO_AUTH_ACTION_COUNT,
                            ActionAuthenticatorMixin.request_count))
        IAMRequestBase.check_action_permitted = self._check(IAMRequestBase.check_action_permitted)  # type: ignore
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        ActionAuthenticatorMixin.request_count = 0
        return self

    def __exit__(self, *exc: object) -> None:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin
        from moto.iam.access_control import IAMRequestBase

        check, count, requests = self._stack.pop()
        IAMRequestBase.check_action_permitted = check  # type: ignore[method-assign]
        settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = count, requests


def _raise_denied(req: Any, message: str) -> None:
    from moto.core.exceptions import JsonRESTError

    if req._service in ("s3", "ec2", "sts", "iam"):  # XML protocols: moto's own error shapes
        req._raise_access_denied()
    raise JsonRESTError("AccessDeniedException", message)


# --- the state machine's own calls, checked statically -----------------------------------------------------------

@dataclass(frozen=True)
class AslCall:
    state: str
    action: str
    resource: str | None  # None: given at run time (a ".$" parameter)


def asl_calls(definition: str | Mapping[str, Any], substitutions: Mapping[str, str] | None = None, *,
              region: str, account: str) -> list[AslCall]:
    """Every AWS action the definition's Task states call, with the resources their static parameters name."""
    text = definition if isinstance(definition, str) else json.dumps(definition)
    for k, v in (substitutions or {}).items():
        text = text.replace("${" + k + "}", str(v))
    calls: list[AslCall] = []

    def walk(states: Mapping[str, Any]) -> None:
        for name, st in states.items():
            for branch in st.get("Branches", []):
                walk(branch["States"])
            for key in ("ItemProcessor", "Iterator"):
                if key in st:
                    walk(st[key]["States"])
            if st.get("Type") == "Task":
                calls.extend(_task_calls(name, st, region, account))

    walk(json.loads(text)["States"])
    return calls


def _task_calls(name: str, st: Mapping[str, Any], region: str, account: str) -> list[AslCall]:
    res = re.sub(r"\.(waitForTaskToken|sync(:2)?)$", "", st["Resource"])
    params = st.get("Parameters") or st.get("Arguments") or {}
    m = re.fullmatch(r"arn:[\w-]+:states:::(?:aws-sdk:)?([\w-]+):(\w+)", res)
    if m is None:
        if ":function:" in res:
            return [AslCall(name, "lambda:InvokeFunction", res)]
        return [AslCall(name, f"unknown:{res}", None)]
    service = SDK_SERVICE_PREFIX.get(m.group(1), m.group(1))
    action = f"{service}:{m.group(2)[0].upper()}{m.group(2)[1:]}"
    if action == "lambda:Invoke":
        action = "lambda:InvokeFunction"
        fn = params.get("FunctionName")
        return [AslCall(name, action, None if fn is None else fn if fn.startswith("arn:")
                        else f"arn:aws:lambda:{region}:{account}:function:{fn}")]
    arns = request_checks(action, "*", {}, json.dumps({k: v for k, v in params.items() if not k.endswith(".$")})
                          .encode(), "", region, account)
    if service == "ec2" and "InstanceIds" not in params:
        arns = [(action, None)]
    if action == "ssm:SendCommand" and "InstanceIds" not in params:
        arns.append((action, None))
    return [AslCall(name, a, r) for a, r in arns]


def check_state_machine(actor: Actor, definition: str | Mapping[str, Any], substitutions: Mapping[str, str],
                        *, region: str, account: str) -> list[tuple[AslCall, Decision]]:
    return [(c, evaluate(actor.statements, c.action, c.resource))
            for c in asl_calls(definition, substitutions, region=region, account=account)]


def state_machine_denials(actor: Actor, definition: str | Mapping[str, Any], substitutions: Mapping[str, str],
                          *, region: str, account: str) -> list[IamDeniedError]:
    return [IamDeniedError(actor.name, c.action, c.resource, actor.role, d.denied_by)
            for c, d in check_state_machine(actor, definition, substitutions, region=region, account=account)
            if not d.allowed]


# --- what neither moto nor this module checks --------------------------------------------------------------------

def unchecked(model: IamModel, recorder: IamRecorder | None = None,
              static: Iterable[tuple[AslCall, Decision]] = ()) -> list[str]:
    """One line per thing the rehearsal's IAM enforcement cannot vouch for."""
    lines = []
    for actor in model.actors.values():
        for s in actor.statements:
            if s.condition:
                keys = ", ".join(f"{op} {k}" for op, spec in s.condition.items() for k in spec)
                n = recorder.conditions_evaluated[(actor.name, s.label)] if recorder else 0
                if n and not recorder.conditions_assumed[(actor.name, s.label)]:  # type: ignore[union-attr]
                    continue  # evaluated from the request on every call it applied to (shown by the summary)
                lines.append(f"{actor.name}: statement {s.label}: condition not evaluated ({keys}); "
                             "treated as if it held (moto ignores IAM conditions too)")
    seen = set()
    for c in (recorder.calls if recorder else []):
        if c.resource is None and (c.actor, c.action) not in seen:
            seen.add((c.actor, c.action))
            lines.append(f"{c.actor}: {c.action}: resource not derivable from the request; only the action "
                         "was checked")
    for c, _ in static:
        if c.resource is None and ("state machine", c.action) not in seen:
            seen.add(("state machine", c.action))
            lines.append(f"state machine: {c.action} (state {c.state}): resource given at run time; only the "
                         "action was checked")
    lines.extend(model.notes)
    lines.extend([
        "trust policies (which service may assume each role) and instance-profile bindings: not evaluated",
        "the state machine's calls are enforced when they run (moto's interpreter key bound to its actor) and "
        "checked statically for every Task of the ASL; Step Functions' own service-integration permissions "
        "(e.g. .sync's events:PutRule) are not modelled",
        "EventBridge -> Lambda and Step Functions -> Lambda invocations: service paths, not evaluated by moto",
        "the real SSM agent's own calls (ssm:UpdateInstanceInformation, ssmmessages:*, ec2messages:*, CloudWatch "
        "output) and the Lambda runtime's (log delivery, X-Ray) are not made in the rehearsal: their grants are "
        "checked statically against the roles (rehearsal.service_calls), not enforced",
        "SCPs, permission boundaries, session policies and KMS key policies: none modelled",
    ])
    return lines


@contextmanager
def enforced(model: IamModel, keys: Mapping[str, AccessKey]) -> Iterator[IamRecorder]:
    with IamEnforcement(model, keys) as enforcement:
        yield enforcement.recorder
