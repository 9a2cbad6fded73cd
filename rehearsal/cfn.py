"""A synthesized cloud assembly read back: templates, an intrinsic resolver, the assets ``cdk deploy`` publishes.

The rehearsal creates the stacks' resources from ``cdk.out`` rather than re-declaring them, so it needs what
CloudFormation does with a template: ``Ref``/``Fn::GetAtt`` answered from physical ids (which the caller fills as
it creates resources, or which default to CloudFormation-style generated names), parameters from their defaults,
pseudo parameters from an :class:`AwsEnv`, ``Fn::ImportValue`` from the other stacks' exports (CDK's strong
cross-stack references), conditions, and the string functions. Whatever cannot be answered raises
:class:`TemplateResolveError` naming the stack, the logical id and the path inside it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOTO_ACCOUNT_ID = "123456789012"  # moto's default account


class AssemblyError(Exception):
    """The cloud assembly directory is missing or malformed."""


class TemplateResolveError(Exception):
    """An intrinsic function could not be resolved; names the stack, logical id and path."""

    def __init__(self, stack: str, where: str, path: str, reason: str) -> None:
        super().__init__(f"{stack}: {where} at {path or '<root>'}: {reason}")
        self.stack, self.where, self.path, self.reason = stack, where, path, reason


class _NoValue:
    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()


@dataclass(frozen=True)
class AwsEnv:
    region: str = "us-west-2"
    account_id: str = MOTO_ACCOUNT_ID
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"


@dataclass(frozen=True)
class Resource:
    logical_id: str
    type: str
    properties: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    condition: str | None = None

    @property
    def is_custom(self) -> bool:
        return self.type.startswith("Custom::") or self.type == "AWS::CloudFormation::CustomResource"


@dataclass
class Template:
    stack_name: str
    path: Path
    body: dict[str, Any]
    resources: dict[str, Resource] = field(default_factory=dict)

    @classmethod
    def load(cls, stack_name: str, path: Path) -> Template:
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise AssemblyError(f"{stack_name}: cannot read template {path}: {exc}") from exc
        resources = {}
        for lid, res in body.get("Resources", {}).items():
            dep = res.get("DependsOn", ())
            resources[lid] = Resource(
                lid,
                res["Type"],
                dict(res.get("Properties", {})),
                tuple([dep] if isinstance(dep, str) else dep),
                res.get("Condition"),
            )
        return cls(stack_name, path, body, resources)

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return dict(self.body.get("Parameters", {}))

    @property
    def conditions(self) -> dict[str, Any]:
        return dict(self.body.get("Conditions", {}))

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return dict(self.body.get("Outputs", {}))

    @property
    def mappings(self) -> dict[str, Any]:
        return dict(self.body.get("Mappings", {}))

    def of_type(self, type_: str) -> dict[str, Resource]:
        return {lid: r for lid, r in self.resources.items() if r.type == type_}

    def resource(self, logical_id: str) -> Resource:
        try:
            return self.resources[logical_id]
        except KeyError:
            raise TemplateResolveError(self.stack_name, logical_id, "", "no such resource in the template") from None


@dataclass
class Assembly:
    directory: Path
    templates: dict[str, Template]  # stack name -> template, in deployment (dependency) order
    region: str | None = None

    def template(self, stack_name: str) -> Template:
        try:
            return self.templates[stack_name]
        except KeyError:
            raise AssemblyError(
                f"no stack {stack_name!r} in {self.directory}; stacks: {', '.join(self.templates)}"
            ) from None

    def __iter__(self) -> Iterator[Template]:
        return iter(self.templates.values())


def load_assembly(directory: str | Path) -> Assembly:
    """Reads ``manifest.json`` and every stack template it lists, ordered so a stack follows its dependencies."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise AssemblyError(f"not a cloud assembly: {directory}/manifest.json: {exc}") from exc
    artifacts = manifest.get("artifacts", {})
    stacks = {aid: a for aid, a in artifacts.items() if a.get("type") == "aws:cloudformation:stack"}
    order: list[str] = []

    def visit(aid: str, seen: tuple[str, ...] = ()) -> None:
        if aid in order or aid not in stacks:
            return
        if aid in seen:
            raise AssemblyError(f"dependency cycle between stacks: {' -> '.join(seen + (aid,))}")
        for dep in stacks[aid].get("dependencies", []):
            visit(dep, seen + (aid,))
        order.append(aid)

    for aid in stacks:
        visit(aid)
    templates: dict[str, Template] = {}
    region = None
    for aid in order:
        props = stacks[aid].get("properties", {})
        name = props.get("stackName", aid)
        templates[name] = Template.load(name, directory / props["templateFile"])
        env = stacks[aid].get("environment", "")
        if env.startswith("aws://") and not env.endswith("/unknown-region"):
            region = env.rsplit("/", 1)[1]
    return Assembly(directory, templates, region)


def synth_assembly(outdir: str | Path, context: Mapping[str, Any] | None = None) -> Assembly:
    """Synthesizes the project's CDK app into ``outdir`` (without the Lambda layer unless context says so)."""
    from infra.app import build_app, synth

    ctx: dict[str, Any] = {"neuronpipe": {"require_lambda_deps": False}}
    for key, value in (context or {}).items():
        ctx[key] = {**ctx.get(key, {}), **value} if isinstance(value, dict) else value
    synth(build_app(outdir=str(outdir), context=ctx))
    return load_assembly(outdir)


# --- physical ids ------------------------------------------------------------------------------

NAME_PROPERTY = {
    "AWS::S3::Bucket": "BucketName",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::Policy": "PolicyName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SSM::Parameter": "Name",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Events::Rule": "Name",
    "AWS::Events::EventBus": "Name",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::Lambda::LayerVersion": "LayerName",
}
# Types CloudFormation gives a generated id (their Ref): unless one is recorded (the deployment records moto's real
# ids), the resolver answers a deterministic id of the same form, ``<prefix>-<17 hex digits>``.
GENERATED_ID_PREFIX = {
    "AWS::EC2::VPC": "vpc",
    "AWS::EC2::Subnet": "subnet",
    "AWS::EC2::SecurityGroup": "sg",
    "AWS::EC2::LaunchTemplate": "lt",
}
# Types whose Ref (physical id) is an ARN rather than a name.
REF_IS_ARN = {
    "AWS::StepFunctions::StateMachine",
    "AWS::SNS::Topic",
    "AWS::IAM::ManagedPolicy",
    "AWS::Lambda::LayerVersion",
}


def generated_id(stack: str, logical_id: str, type_: str) -> str:
    """A CloudFormation-style generated id (``subnet-0123…``) for one of :data:`GENERATED_ID_PREFIX`'s types."""
    return f"{GENERATED_ID_PREFIX[type_]}-{hashlib.sha256(f'{stack}/{logical_id}'.encode()).hexdigest()[:17]}"


def generated_name(stack: str, logical_id: str, type_: str) -> str:
    """A CloudFormation-style generated name ``<stack>-<LogicalId>-<SUFFIX>``, deterministic here."""
    suffix = hashlib.sha256(f"{stack}/{logical_id}".encode()).hexdigest()[:12].upper()
    name = f"{stack}-{logical_id}"[:50] + f"-{suffix}"
    return name.lower() if type_ == "AWS::S3::Bucket" else name


class Resolver:
    """Resolves intrinsics of every template of an assembly.

    ``physical_ids[(stack, logical_id)]`` is what ``Ref`` of the resource returns (CloudFormation's physical id:
    a name for most types, an ARN for state machines/topics/managed policies, an id for EC2). Unset ids of
    nameable types default to the ``Name``-like property or a generated name, those of VPCs, subnets, security
    groups and launch templates to a generated id (:func:`generated_id`); others (instances, volumes) raise.
    ``attributes[(stack, logical_id, attribute)]`` overrides ``Fn::GetAtt`` (custom resources, EC2 attributes).
    """

    def __init__(
        self,
        assembly: Assembly,
        env: AwsEnv | None = None,
        *,
        physical_ids: Mapping[tuple[str, str], str] | None = None,
        attributes: Mapping[tuple[str, str, str], Any] | None = None,
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.assembly = assembly
        self.env = env or AwsEnv(region=assembly.region or AwsEnv.region)
        self.physical_ids: dict[tuple[str, str], str] = dict(physical_ids or {})
        self.attributes: dict[tuple[str, str, str], Any] = dict(attributes or {})
        self.parameters = {k: dict(v) for k, v in (parameters or {}).items()}
        self._active: set[tuple[str, str]] = set()

    # -- public -----------------------------------------------------------------------------------
    def set_physical_id(self, stack: str, logical_id: str, physical_id: str) -> None:
        self.physical_ids[(stack, logical_id)] = physical_id

    def resolve(self, stack: str, value: Any, path: str = "", where: str = "<value>") -> Any:
        return self._resolve(stack, value, path, where)

    def properties(self, stack: str, logical_id: str) -> dict[str, Any]:
        """The resource's Properties with every intrinsic resolved."""
        res = self.assembly.template(stack).resource(logical_id)
        return self._guard(
            stack, logical_id, "Properties", lambda: self._resolve(stack, res.properties, "Properties", logical_id)
        )

    def physical_id(self, stack: str, logical_id: str) -> str:
        if (stack, logical_id) in self.physical_ids:
            return self.physical_ids[(stack, logical_id)]
        res = self.assembly.template(stack).resource(logical_id)
        prop = NAME_PROPERTY.get(res.type)
        if prop is None and res.type in GENERATED_ID_PREFIX:
            self.physical_ids[(stack, logical_id)] = generated_id(stack, logical_id, res.type)
            return self.physical_ids[(stack, logical_id)]
        if prop is None:
            raise TemplateResolveError(
                stack,
                logical_id,
                "Ref",
                f"no physical id known for a {res.type} (create it first and record its id with set_physical_id)",
            )
        if prop in res.properties:
            name = str(
                self._guard(
                    stack,
                    logical_id,
                    f"Properties.{prop}",
                    lambda: self._resolve(stack, res.properties[prop], f"Properties.{prop}", logical_id),
                )
            )
        else:
            name = generated_name(stack, logical_id, res.type)
        physical = self._arn(res.type, name) if res.type in REF_IS_ARN else name
        self.physical_ids[(stack, logical_id)] = physical
        return physical

    def get_att(self, stack: str, logical_id: str, attribute: str) -> Any:
        if (stack, logical_id, attribute) in self.attributes:
            return self.attributes[(stack, logical_id, attribute)]
        res = self.assembly.template(stack).resource(logical_id)
        value = self._computed_attribute(stack, res, attribute)
        if value is None:
            hint = " (a custom resource's Data: set it in attributes)" if res.is_custom else ""
            raise TemplateResolveError(
                stack,
                logical_id,
                f"Fn::GetAtt {attribute}",
                f"attribute {attribute} of a {res.type} is not known{hint}",
            )
        return value

    def exports(self) -> dict[str, tuple[str, str]]:
        """Export name -> (exporting stack, output name)."""
        found: dict[str, tuple[str, str]] = {}
        for tpl in self.assembly:
            for out_name, out in tpl.outputs.items():
                if "Export" in out:
                    name = self._resolve(
                        tpl.stack_name, out["Export"]["Name"], f"Outputs.{out_name}.Export.Name", out_name
                    )
                    found[str(name)] = (tpl.stack_name, out_name)
        return found

    def output(self, stack: str, name: str) -> Any:
        out = self.assembly.template(stack).outputs.get(name)
        if out is None:
            raise TemplateResolveError(stack, name, "Outputs", "no such output")
        return self._resolve(stack, out["Value"], f"Outputs.{name}.Value", name)

    def condition(self, stack: str, name: str) -> bool:
        conds = self.assembly.template(stack).conditions
        if name not in conds:
            raise TemplateResolveError(stack, name, "Conditions", "no such condition")
        return bool(
            self._guard(
                stack, name, "Conditions", lambda: self._resolve(stack, conds[name], f"Conditions.{name}", name)
            )
        )

    def is_active(self, stack: str, logical_id: str) -> bool:
        """False when the resource carries a ``Condition`` that evaluates to false."""
        cond = self.assembly.template(stack).resource(logical_id).condition
        return cond is None or self.condition(stack, cond)

    # -- attributes -------------------------------------------------------------------------------
    def _arn(self, type_: str, name: str) -> str:
        e = self.env
        regional = f"arn:{e.partition}:{{}}:{e.region}:{e.account_id}:{{}}"
        return {
            "AWS::StepFunctions::StateMachine": regional.format("states", f"stateMachine:{name}"),
            "AWS::SNS::Topic": regional.format("sns", name),
            "AWS::IAM::ManagedPolicy": f"arn:{e.partition}:iam::{e.account_id}:policy/{name}",
            "AWS::Lambda::LayerVersion": regional.format("lambda", f"layer:{name}:1"),
        }[type_]

    def _computed_attribute(self, stack: str, res: Resource, attribute: str) -> Any:
        e = self.env
        lid, t = res.logical_id, res.type
        if t in ("AWS::SSM::Parameter",) and attribute in ("Value", "Type"):
            return self.properties(stack, lid).get(attribute)
        if t == "AWS::EC2::Instance" and attribute == "AvailabilityZone":
            return self.properties(stack, lid).get("AvailabilityZone")
        if t == "AWS::EC2::SecurityGroup" and attribute == "GroupId":
            return self.physical_id(stack, lid)
        if t == "AWS::EC2::LaunchTemplate":
            return {
                "LaunchTemplateId": self.physical_id(stack, lid),
                "LatestVersionNumber": "1",
                "DefaultVersionNumber": "1",
            }.get(attribute)
        if t in REF_IS_ARN:
            arn = self.physical_id(stack, lid)
            return {
                "Arn": arn,
                "TopicArn": arn,
                "PolicyArn": arn,
                "LayerVersionArn": arn,
                "Name": arn.rsplit(":", 1)[-1],
                "TopicName": arn.rsplit(":", 1)[-1],
                "StateMachineName": arn.rsplit(":", 1)[-1],
            }.get(attribute)
        if t not in NAME_PROPERTY:
            return None
        name = self.physical_id(stack, lid)
        regional = f"arn:{e.partition}:{{}}:{e.region}:{e.account_id}:{{}}"
        arns = {
            "AWS::IAM::Role": f"arn:{e.partition}:iam::{e.account_id}:role"
            f"{self.properties(stack, lid).get('Path', '/')}{name}",
            "AWS::IAM::InstanceProfile": f"arn:{e.partition}:iam::{e.account_id}:instance-profile"
            f"{self.properties(stack, lid).get('Path', '/')}{name}",
            "AWS::Lambda::Function": regional.format("lambda", f"function:{name}"),
            "AWS::S3::Bucket": f"arn:{e.partition}:s3:::{name}",
            "AWS::DynamoDB::Table": regional.format("dynamodb", f"table/{name}"),
            "AWS::Logs::LogGroup": regional.format("logs", f"log-group:{name}:*"),
            "AWS::Events::Rule": regional.format("events", f"rule/{name}"),
            "AWS::Events::EventBus": regional.format("events", f"event-bus/{name}"),
            "AWS::SQS::Queue": regional.format("sqs", name),
            "AWS::SSM::Parameter": regional.format("ssm", f"parameter/{name.lstrip('/')}"),
        }
        if attribute == "Arn":
            return arns.get(t)
        if t == "AWS::S3::Bucket":
            return {
                "DomainName": f"{name}.s3.{e.url_suffix}",
                "RegionalDomainName": f"{name}.s3.{e.region}.{e.url_suffix}",
            }.get(attribute)
        if attribute in ("Name", "StreamName", "QueueName") and t in ("AWS::Events::EventBus", "AWS::SQS::Queue"):
            return name
        if t == "AWS::SQS::Queue" and attribute == "QueueUrl":
            return f"https://sqs.{e.region}.{e.url_suffix}/{e.account_id}/{name}"
        return None

    # -- the resolver proper ----------------------------------------------------------------------
    def _guard(self, stack: str, lid: str, what: str, fn: Any) -> Any:
        key = (stack, f"{lid}/{what}")
        if key in self._active:
            raise TemplateResolveError(stack, lid, what, "circular reference")
        self._active.add(key)
        try:
            return fn()
        finally:
            self._active.discard(key)

    def _resolve(self, stack: str, value: Any, path: str, where: str) -> Any:
        if isinstance(value, list):
            items = [self._resolve(stack, v, f"{path}[{i}]", where) for i, v in enumerate(value)]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" or key.startswith("Fn::") or key == "Condition":
                return self._intrinsic(stack, key, arg, f"{path}.{key}", where)
        out = {}
        for k, v in value.items():
            r = self._resolve(stack, v, f"{path}.{k}" if path else k, where)
            if r is not NO_VALUE:
                out[k] = r
        return out

    def _intrinsic(self, stack: str, fn: str, arg: Any, path: str, where: str) -> Any:
        def fail(reason: str) -> TemplateResolveError:
            return TemplateResolveError(stack, where, path, reason)

        def sub(v: Any, suffix: str = "") -> Any:
            return self._resolve(stack, v, path + suffix, where)

        def text(v: Any) -> str:
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, (str, int, float)):
                return str(v)
            raise fail(f"expected a string, got {json.dumps(v)[:80]}")

        if fn == "Ref":
            return self._ref(stack, sub(arg), path, where)
        if fn == "Condition":
            return self.condition(stack, arg)
        if fn == "Fn::GetAtt":
            parts = arg.split(".", 1) if isinstance(arg, str) else sub(arg)
            if not isinstance(parts, list) or len(parts) != 2:
                raise fail(f"malformed Fn::GetAtt {arg!r}")
            return self._at(stack, where, path, lambda: self.get_att(stack, parts[0], text(parts[1])))
        if fn == "Fn::Join":
            if not (isinstance(arg, list) and len(arg) == 2):
                raise fail("Fn::Join takes [delimiter, [values]]")
            items = sub(arg[1], "[1]")
            if not isinstance(items, list):
                raise fail("Fn::Join's second argument is not a list")
            return text(sub(arg[0], "[0]")).join(text(i) for i in items)
        if fn == "Fn::Sub":
            return self._sub(stack, arg, path, where, fail)
        if fn == "Fn::Select":
            index, items = sub(arg[0], "[0]"), sub(arg[1], "[1]")
            try:
                return items[int(index)]
            except (IndexError, ValueError, TypeError):
                raise fail(f"Fn::Select index {index!r} out of range of {items!r}") from None
        if fn == "Fn::Split":
            return text(sub(arg[1], "[1]")).split(text(sub(arg[0], "[0]")))
        if fn == "Fn::If":
            cond, yes, no = arg
            return sub(yes, "[1]") if self.condition(stack, cond) else sub(no, "[2]")
        if fn == "Fn::Equals":
            a, b = sub(arg[0], "[0]"), sub(arg[1], "[1]")
            return text(a) == text(b) if not isinstance(a, (list, dict)) else a == b
        if fn == "Fn::And":
            return all(sub(a, f"[{i}]") for i, a in enumerate(arg))
        if fn == "Fn::Or":
            return any(sub(a, f"[{i}]") for i, a in enumerate(arg))
        if fn == "Fn::Not":
            return not sub(arg[0], "[0]")
        if fn == "Fn::ImportValue":
            name = text(sub(arg))
            exporter = self.exports().get(name)
            if exporter is None:
                raise fail(f"no stack exports {name!r}")
            return self._at(stack, where, path, lambda: self.output(*exporter))
        if fn == "Fn::Base64":
            return base64.b64encode(text(sub(arg)).encode()).decode()
        if fn == "Fn::GetAZs":
            region = text(sub(arg)) or self.env.region
            return [f"{region}{z}" for z in "abcd"]
        if fn == "Fn::FindInMap":
            m, k1, k2 = (text(sub(a, f"[{i}]")) for i, a in enumerate(arg))
            try:
                return self.assembly.template(stack).mappings[m][k1][k2]
            except KeyError:
                raise fail(f"no mapping {m}/{k1}/{k2}") from None
        if fn == "Fn::ToJsonString":
            return json.dumps(sub(arg), separators=(",", ":"))
        if fn == "Fn::Length":
            return len(sub(arg))
        raise fail(f"{fn} is not supported by the rehearsal's resolver")

    def _at(self, stack: str, where: str, path: str, fn: Any) -> Any:
        try:
            return fn()
        except TemplateResolveError as exc:
            if exc.stack == stack and exc.where == where:
                raise
            raise TemplateResolveError(stack, where, path, str(exc)) from exc

    def _ref(self, stack: str, name: Any, path: str, where: str) -> Any:
        e = self.env
        pseudo = {
            "AWS::Region": e.region,
            "AWS::AccountId": e.account_id,
            "AWS::Partition": e.partition,
            "AWS::URLSuffix": e.url_suffix,
            "AWS::StackName": stack,
            "AWS::NoValue": NO_VALUE,
            "AWS::NotificationARNs": [],
            "AWS::StackId": f"arn:{e.partition}:cloudformation:{e.region}:{e.account_id}:stack/{stack}/"
            + hashlib.sha256(stack.encode()).hexdigest()[:32],
        }
        if name in pseudo:
            return pseudo[name]
        tpl = self.assembly.template(stack)
        params = tpl.parameters
        if name in params:
            given = self.parameters.get(stack, {})
            if name in given:
                return given[name]
            if "Default" in params[name]:
                return params[name]["Default"]
            raise TemplateResolveError(stack, where, path, f"parameter {name} has no default and no value given")
        if name in tpl.resources:
            return self._at(stack, where, path, lambda: self.physical_id(stack, name))
        raise TemplateResolveError(stack, where, path, f"Ref to unknown name {name!r}")

    _SUB_VAR = re.compile(r"\$\{([^}]*)\}")

    def _sub(self, stack: str, arg: Any, path: str, where: str, fail: Any) -> str:
        if isinstance(arg, list):
            if len(arg) != 2 or not isinstance(arg[0], str) or not isinstance(arg[1], dict):
                raise fail("Fn::Sub takes a string or [string, {variables}]")
            template, variables = (
                arg[0],
                {k: self._resolve(stack, v, f"{path}[1].{k}", where) for k, v in arg[1].items()},
            )
        elif isinstance(arg, str):
            template, variables = arg, {}
        else:
            raise fail("Fn::Sub takes a string or [string, {variables}]")

        def one(m: re.Match[str]) -> str:
            var = m.group(1)
            if var.startswith("!"):
                return "${" + var[1:] + "}"
            if var in variables:
                value = variables[var]
            elif "." in var and not var.startswith("AWS::"):
                lid, attr = var.split(".", 1)
                value = self._at(stack, where, path, lambda: self.get_att(stack, lid, attr))
            else:
                value = self._ref(stack, var, path, where)
            if not isinstance(value, (str, int, float)):
                raise fail(f"${{{var}}} resolves to a non-string {value!r}")
            return str(value)

        return self._SUB_VAR.sub(one, template)


# --- assets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Asset:
    asset_id: str
    stack_name: str
    display_name: str
    source: Path  # absolute: a directory (packaging "zip") or a file
    packaging: str  # "zip" (a directory, zipped) or "file" (uploaded as is)
    bucket_name: str
    object_key: str
    region: str | None
    is_template: bool

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket_name}/{self.object_key}"


def _placeholders(text: str, env: AwsEnv) -> str:
    return (
        text.replace("${AWS::AccountId}", env.account_id)
        .replace("${AWS::Partition}", env.partition)
        .replace("${AWS::Region}", env.region)
    )


def assets(assembly: Assembly, env: AwsEnv | None = None, *, include_templates: bool = False) -> list[Asset]:
    """The file assets each ``*.assets.json`` asks ``cdk deploy`` to publish, placeholders resolved."""
    env = env or AwsEnv(region=assembly.region or AwsEnv.region)
    found: list[Asset] = []
    for tpl in assembly:
        manifest_path = assembly.directory / f"{tpl.stack_name}.assets.json"
        if not manifest_path.is_file():
            continue
        try:
            files = json.loads(manifest_path.read_text()).get("files", {})
        except ValueError as exc:
            raise AssemblyError(f"{manifest_path}: {exc}") from exc
        for asset_id, spec in files.items():
            source = spec.get("source", {})
            is_template = source.get("path", "").endswith(".template.json")
            if is_template and not include_templates:
                continue
            if "path" not in source:
                raise AssemblyError(
                    f"{manifest_path}: asset {asset_id} has no source path (executable assets are not supported)"
                )
            for dest in spec.get("destinations", {}).values():
                found.append(
                    Asset(
                        asset_id,
                        tpl.stack_name,
                        spec.get("displayName", asset_id),
                        (assembly.directory / source["path"]).resolve(),
                        source.get("packaging", "file"),
                        _placeholders(dest["bucketName"], env),
                        _placeholders(dest["objectKey"], env),
                        dest.get("region"),
                        is_template,
                    )
                )
    return found
