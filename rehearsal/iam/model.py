"""The IAM model of a synthesized assembly: every actor with the policy documents its role holds.

Actors: each box (its instance profile's role), the fleet's ephemeral boxes (their launch template's profile),
each Lambda (its execution role), the state machine (its role), and ``operator`` (admin). Their documents come
from the templates: inline ``Policies``, ``AWS::IAM::Policy``/``ManagedPolicy`` attached through ``Roles``,
``ManagedPolicyArns`` incl. AWS managed ones from moto's copy; intrinsics resolved.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rehearsal.cfn import Assembly, Resolver, Template, TemplateResolveError
from rehearsal.iam.evaluate import PolicyDoc, Statement, statements

ADMIN_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "Admin", "Effect": "Allow", "Action": "*", "Resource": "*"}],
}


class IamModelError(Exception):
    """The templates' IAM could not be read into actors."""


@dataclass(frozen=True)
class Actor:
    name: str  # "box:trn1", "box:fleet" (every ephemeral box), "lambda:plan_run", "state-machine:<name>",
    #                    "operator"
    kind: str  # "box" | "lambda" | "state_machine" | "operator"
    role: str  # "<stack>/<role logical id>" ("operator" for the operator)
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
    roles = _read_roles(assembly, resolver, notes)
    found = _Actors(roles, notes)
    for tpl in assembly:
        _lambda_actors(tpl, resolver, found)
        _state_machine_actors(tpl, resolver, found)
        _box_actors(tpl, resolver, found)
        _fleet_actor(tpl, resolver, found)
        notes.extend(_resource_policy_notes(tpl))
    actors = found.actors
    if operator:
        actors["operator"] = Actor("operator", "operator", "operator", (PolicyDoc("Admin", "operator", ADMIN_POLICY),))
    return IamModel(actors, notes)


# --- the roles and their documents -------------------------------------------------------------------------------


@dataclass
class _Roles:
    docs: dict[str, list[PolicyDoc]]  # "<stack>/<lid>" -> docs
    by_name: dict[str, str]  # role name -> "<stack>/<lid>"

    def key_of(self, arn_or_name: str) -> str:
        key = self.by_name.get(str(arn_or_name).rsplit("/", 1)[-1])
        if key is None or key not in self.docs:
            raise IamModelError(f"role {arn_or_name} is not a modelled role of the assembly")
        return key


def _read_roles(assembly: Assembly, resolver: Resolver, notes: list[str]) -> _Roles:
    """Each role's documents: its own, the managed ones it names, the policies that name it (a role of a stack
    read before the policy's, or of the same stack); customer managed policies filled in last."""
    roles: dict[str, list[PolicyDoc]] = {}
    by_name: dict[str, str] = {}
    managed: dict[str, PolicyDoc] = {}  # customer managed policy ARN -> doc
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
            roles[key] = _role_docs(key, props, notes)
        for lid in [*tpl.of_type("AWS::IAM::ManagedPolicy"), *tpl.of_type("AWS::IAM::Policy")]:
            props = resolver.properties(s, lid)
            doc = PolicyDoc(
                props.get("PolicyName") or props.get("ManagedPolicyName") or lid, f"{s}/{lid}", props["PolicyDocument"]
            )
            if tpl.resources[lid].type == "AWS::IAM::ManagedPolicy":
                managed[str(resolver.physical_id(s, lid))] = doc
            for role_name in props.get("Roles", []):
                if by_name.get(role_name) in roles:
                    roles[by_name[role_name]].append(doc)
    for docs in roles.values():
        docs[:] = [managed.get(d.name, d) if d.source.startswith("managed:") else d for d in docs]
    return _Roles(roles, by_name)


def _role_docs(key: str, props: dict[str, Any], notes: list[str]) -> list[PolicyDoc]:
    """A role's inline policies and the managed policies it names (a customer managed one as a placeholder)."""
    docs = [PolicyDoc(p["PolicyName"], key, p["PolicyDocument"]) for p in props.get("Policies", [])]
    for arn in props.get("ManagedPolicyArns", []):
        m = re.fullmatch(r"arn:[\w-]+:iam::aws:policy/(?:.*/)?([^/]+)", arn)
        doc = aws_managed_policy(m.group(1)) if m else None
        if doc is not None:
            docs.append(PolicyDoc(m.group(1), f"aws-managed:{m.group(1)}", doc))
        elif not m:
            docs.append(PolicyDoc(arn, f"managed:{arn}", {}))  # filled in by _read_roles
        else:
            notes.append(f"role {key}: AWS managed policy {arn} unknown to moto: not enforced")
    return docs


# --- the actors --------------------------------------------------------------------------------------------------


class _Actors:
    """The actors found so far; one whose role is not modelled is left out with a note."""

    def __init__(self, roles: _Roles, notes: list[str]):
        self.roles, self.notes = roles, notes
        self.actors: dict[str, Actor] = {}

    def add(self, name: str, kind: str, role_ref: Any, where: str) -> None:
        try:
            key = self.roles.key_of(role_ref)
        except IamModelError as exc:
            self.notes.append(f"{name} ({where}) not rehearsed: {exc}")
            return
        self.actors[name] = Actor(name, kind, key, tuple(self.roles.docs[key]))


def _lambda_actors(tpl: Template, resolver: Resolver, found: _Actors) -> None:
    s = tpl.stack_name
    for lid, res in tpl.of_type("AWS::Lambda::Function").items():
        handler = str(resolver.resolve(s, res.properties.get("Handler", ""), where=lid))
        name = handler.rsplit(".", 2)[-2] if handler.startswith("control_plane.handlers.") else lid
        found.add(f"lambda:{name}", "lambda", _resolve_or(resolver, s, res.properties.get("Role"), lid), f"{s}/{lid}")


def _state_machine_actors(tpl: Template, resolver: Resolver, found: _Actors) -> None:
    s = tpl.stack_name
    for lid, res in tpl.of_type("AWS::StepFunctions::StateMachine").items():
        name = resolver.resolve(s, res.properties.get("StateMachineName", lid), where=lid)
        found.add(
            f"state-machine:{name}",
            "state_machine",
            _resolve_or(resolver, s, res.properties.get("RoleArn"), lid),
            f"{s}/{lid}",
        )


def _box_actors(tpl: Template, resolver: Resolver, found: _Actors) -> None:
    """Each pinned box: its instance profile's role, the actor named by its ``neuronpipe:role`` tag."""
    s = tpl.stack_name
    for lid, res in tpl.of_type("AWS::EC2::Instance").items():
        tags = {t["Key"]: t["Value"] for t in resolver.resolve(s, res.properties.get("Tags", []), where=lid)}
        profile = str(resolver.resolve(s, res.properties.get("IamInstanceProfile", ""), where=lid))
        prof_lid = next(
            (p for p in tpl.of_type("AWS::IAM::InstanceProfile") if resolver.physical_id(s, p) == profile), None
        )
        role_names = resolver.properties(s, prof_lid).get("Roles", []) if prof_lid else []
        found.add(
            f"box:{tags.get('neuronpipe:role', s)}", "box", role_names[0] if role_names else profile, f"{s}/{lid}"
        )


def _fleet_actor(tpl: Template, resolver: Resolver, found: _Actors) -> None:
    """The fleet's ephemeral boxes: one actor, the role of their launch template's instance profile."""
    s = tpl.stack_name
    for lid, res in tpl.of_type("AWS::EC2::LaunchTemplate").items():
        profile = ((res.properties.get("LaunchTemplateData") or {}).get("IamInstanceProfile") or {}).get("Arn")
        prof_lid = profile["Fn::GetAtt"][0] if isinstance(profile, dict) and "Fn::GetAtt" in profile else None
        roles_of = tpl.resources[prof_lid].properties.get("Roles", []) if prof_lid in tpl.resources else []
        role_lid = roles_of[0].get("Ref") if roles_of and isinstance(roles_of[0], dict) else None
        if role_lid is None:
            found.notes.append(f"launch template {s}/{lid}: no instance profile of its stack; its boxes not rehearsed")
        elif "box:fleet" not in found.actors:
            found.add("box:fleet", "box", resolver.physical_id(s, role_lid), f"{s}/{lid}")


def _resource_policy_notes(tpl: Template) -> list[str]:
    """The template's resource-based policies, none of which the rehearsal evaluates."""
    s = tpl.stack_name
    notes = []
    for lid, res in tpl.of_type("AWS::Lambda::Permission").items():
        notes.append(
            f"resource-based policy {s}/{lid} ({res.properties.get('Principal')} may invoke a "
            "function): not evaluated, the rehearsal invokes Lambdas in-process"
        )
    for kind in ("AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy"):
        notes.extend(
            f"resource-based policy {s}/{lid} ({kind}): not evaluated (moto's IAM enforcement "
            "reads identity policies only)"
            for lid in tpl.of_type(kind)
        )
    return notes


def _resolve_or(resolver: Resolver, stack: str, value: Any, lid: str) -> str:
    try:
        return str(resolver.resolve(stack, value, where=lid))
    except TemplateResolveError as exc:
        return f"<unresolvable: {exc}>"
