"""``cdk deploy`` into the moto world: the resources the run needs, created from the synthesized templates.

Nothing here re-declares a resource: names, tags, values, the state machine's definition and substitutions,
the Lambdas' handlers, environments and timeouts are all read from the templates and resolved the way
CloudFormation would (:mod:`rehearsal.cfn`). What is created: the S3 buckets (versioning and EventBridge
notifications as declared), the CDK bootstrap bucket with every file asset published as ``cdk deploy`` would
(directories zipped; the harness zip is the one the boxes install), the SSM parameters, the DynamoDB tables, the
log groups, the EBS volumes, the instances (from a stub image registered in moto, with the template's tags,
type, AZ and user data; an ImageId ``resolve:ssm:<parameter>``, which EC2 resolves at launch and moto does not,
launches the stub too), the VPC with its subnets (CIDR and AZ as declared) and security groups (a launch into a
box subnet needs them), the fleet's launch templates (their data as synthesized, a ``resolve:ssm:`` image replaced
by the stub, recorded in :attr:`Deployment.launch_templates`) with the role and instance profile they name, the
state machine and the Lambda functions (their code is the synthesized asset directory). The rest of the network
plumbing (routes, endpoints, NAT), budgets, SNS and custom resources get placeholder physical ids: the run does
not touch them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.instance_types import CATALOGUE
from rehearsal.cfn import Assembly, AwsEnv, Resolver, Template, assets, generated_name
from rehearsal.events import Rule, rules_from_template
from rehearsal.world import MotoWorld

CREATED_BY_ID = ("AWS::EC2::Instance", "AWS::EC2::Volume")
NETWORK_CREATED = ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup")  # in this order, in moto
PLACEHOLDER_PREFIX = {
    "AWS::EC2::RouteTable": "rtb",
    "AWS::EC2::InternetGateway": "igw",
    "AWS::EC2::NatGateway": "nat",
    "AWS::EC2::EIP": "eipalloc",
    "AWS::EC2::VPCEndpoint": "vpce",
    "AWS::EC2::FlowLog": "fl",
}
STUB_AMI_NAME = "neuronpipe-rehearsal-dlami-stub"
RESOLVE_SSM = "resolve:ssm:"  # EC2's launch-time image id (infra.config.RESOLVE_SSM_PREFIX)


class DeployError(RuntimeError):
    """A template declares something the rehearsal cannot create (the message names stack and resource)."""


@dataclass(frozen=True)
class InstanceRecord:
    stack: str
    logical_id: str
    instance_id: str
    box_role: str
    instance_type: str
    availability_zone: str
    ami_id: str
    iam_role: str  # the role's physical name (IMDS serves it under iam/security-credentials/)
    role_logical_id: str
    user_data: str


@dataclass(frozen=True)
class LaunchTemplateRecord:
    """One of the fleet's launch templates as created in moto (what an ephemeral box of its type boots with)."""

    stack: str
    logical_id: str
    name: str
    template_id: str  # moto's lt-... id
    instance_type: str
    family: str  # pipeline.instance_types family: neuron-inf2 | neuron-trn1 | neuron-trn2 | cuda
    box_role: str  # its neuronpipe:role tag: inf2 | trn1 | cuda
    image_id: str  # what moto launches: the template's pin, or the stub for resolve:ssm:<parameter>
    template_image_id: str  # what the template holds
    iam_role: str  # the physical name of the role behind its instance profile (IMDS serves it)
    role_logical_id: str  # "<stack>/<this>" is rehearsal.iam's Actor.role of the box:fleet actor
    instance_profile: str  # the instance profile's physical name
    security_group_ids: tuple[str, ...]
    tags: dict[str, str]  # the instance tags of its TagSpecifications
    user_data: str  # decoded text

    @property
    def role_key(self) -> str:
        """``<stack>/<role logical id>``: how :mod:`rehearsal.iam` names the role (``Actor.role``)."""
        return f"{self.stack}/{self.role_logical_id}"


@dataclass(frozen=True)
class FunctionRecord:
    stack: str
    logical_id: str
    name: str
    arn: str
    handler: str
    code_dir: Path
    environment: dict[str, str]
    timeout_s: int
    memory_mb: int
    role_logical_id: str


@dataclass
class Deployment:
    assembly: Assembly
    resolver: Resolver
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> name
    parameters: dict[str, str] = field(default_factory=dict)  # name -> value
    tables: dict[str, str] = field(default_factory=dict)  # logical id -> name
    instances: dict[str, InstanceRecord] = field(default_factory=dict)  # box role -> record
    launch_templates: dict[str, LaunchTemplateRecord] = field(default_factory=dict)  # template name -> record
    functions: dict[str, FunctionRecord] = field(default_factory=dict)  # handler module name -> record
    state_machine_arn: str = ""
    state_machine_role_logical_id: str = ""
    state_machine_definition: str = ""
    rules: list[Rule] = field(default_factory=list)
    published: dict[str, str] = field(default_factory=dict)  # asset id -> s3 uri
    topics: dict[str, str] = field(default_factory=dict)  # logical id -> topic ARN (the alert topic among them)

    @property
    def results_bucket(self) -> str:
        return next(v for k, v in self.buckets.items() if k.startswith("Results"))

    def parameter(self, suffix: str) -> str:
        return next(v for k, v in self.parameters.items() if k.endswith(suffix))


def _stack(assembly: Assembly, suffix: str) -> Template:
    return next(t for t in assembly if t.stack_name.endswith(suffix))


def _placeholder(type_: str, stack: str, lid: str) -> str:
    digest = hashlib.sha256(f"{stack}/{lid}".encode()).hexdigest()[:17]
    return f"{PLACEHOLDER_PREFIX.get(type_, 'phys')}-{digest}"


def deploy(world: MotoWorld, assembly: Assembly, workdir: Path) -> Deployment:
    """Create every resource of the assembly the run needs, in dependency order of the stacks."""
    env = AwsEnv(region=world.region)
    ec2 = world.client("ec2")
    ami_id = ec2.register_image(
        Name=STUB_AMI_NAME,
        Architecture="x86_64",
        RootDeviceName="/dev/sda1",
        VirtualizationType="hvm",
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 8}}],
    )["ImageId"]
    # AWS::SSM::Parameter::Value<AWS::EC2::Image::Id> parameters resolve, at deploy, to the stub image
    params = {
        t.stack_name: {
            name: ami_id
            for name, p in t.parameters.items()
            if p.get("Type", "").startswith("AWS::SSM::Parameter::Value<AWS::EC2::Image::Id")
        }
        for t in assembly
    }
    resolver = Resolver(assembly, env, parameters=params)
    dep = Deployment(assembly, resolver)
    _create_network(world, assembly, resolver)
    for tpl in assembly:
        for lid, res in tpl.resources.items():
            if res.type in PLACEHOLDER_PREFIX or (
                res.type.startswith("Custom::")
                or res.type
                in (
                    "AWS::Budgets::Budget",
                    "AWS::EC2::VPCGatewayAttachment",
                    "AWS::EC2::Route",
                    "AWS::EC2::SubnetRouteTableAssociation",
                    "AWS::EC2::VolumeAttachment",
                )
            ):
                resolver.set_physical_id(tpl.stack_name, lid, _placeholder(res.type, tpl.stack_name, lid))
    _publish_assets(world, assembly, env, dep, workdir)
    for tpl in assembly:
        _create_stack(world, tpl, resolver, dep, ami_id, workdir)
    control = _stack(assembly, "ControlPlane")
    dep.rules = rules_from_template(control, resolver)
    return dep


def _create_network(world: MotoWorld, assembly: Assembly, resolver: Resolver) -> None:
    """The VPCs, their subnets (CIDR, AZ) and security groups, created in moto: their ids are what the Lambdas'
    NEURONPIPE_FLEET_SUBNETS and the launch templates' SecurityGroupIds resolve to."""
    ec2 = world.client("ec2")
    for type_ in NETWORK_CREATED:
        for tpl in assembly:
            stack = tpl.stack_name
            for lid in tpl.of_type(type_):
                props = resolver.properties(stack, lid)
                if type_ == "AWS::EC2::VPC":
                    made = ec2.create_vpc(CidrBlock=props["CidrBlock"])["Vpc"]["VpcId"]
                elif type_ == "AWS::EC2::Subnet":
                    made = ec2.create_subnet(
                        VpcId=props["VpcId"], CidrBlock=props["CidrBlock"], AvailabilityZone=props["AvailabilityZone"]
                    )["Subnet"]["SubnetId"]
                    if props.get("MapPublicIpOnLaunch") is not None:
                        ec2.modify_subnet_attribute(
                            SubnetId=made, MapPublicIpOnLaunch={"Value": bool(props["MapPublicIpOnLaunch"])}
                        )
                else:
                    made = ec2.create_security_group(
                        GroupName=props.get("GroupName") or generated_name(stack, lid, type_),
                        Description=props.get("GroupDescription") or lid,
                        VpcId=props["VpcId"],
                    )["GroupId"]
                resolver.set_physical_id(stack, lid, made)


def _publish_assets(world: MotoWorld, assembly: Assembly, env: AwsEnv, dep: Deployment, workdir: Path) -> None:
    s3 = world.client("s3")
    made: set[str] = set()
    for asset in assets(assembly, env):
        if asset.bucket_name not in made:
            s3.create_bucket(Bucket=asset.bucket_name, CreateBucketConfiguration={"LocationConstraint": world.region})
            made.add(asset.bucket_name)
        if asset.packaging == "zip" and asset.source.is_dir():
            archive = workdir / "assets" / f"{asset.asset_id}.zip"
            archive.parent.mkdir(parents=True, exist_ok=True)
            if not archive.exists():
                with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
                    for path in sorted(asset.source.rglob("*")):
                        if path.is_file():
                            zf.write(path, path.relative_to(asset.source).as_posix())
            s3.upload_file(str(archive), asset.bucket_name, asset.object_key)
        else:
            s3.upload_file(str(asset.source), asset.bucket_name, asset.object_key)
        dep.published[asset.asset_id] = asset.s3_uri


def _asset_dir(assembly: Assembly, env: AwsEnv, bucket: str, key: str) -> Path:
    for asset in assets(assembly, env):
        if asset.bucket_name == bucket and asset.object_key == key:
            return asset.source
    raise DeployError(f"no asset is published to s3://{bucket}/{key}")


def _create_stack(
    world: MotoWorld, tpl: Template, resolver: Resolver, dep: Deployment, ami_id: str, workdir: Path
) -> None:
    stack = tpl.stack_name
    s3, ssm = world.client("s3"), world.client("ssm")
    for lid in tpl.of_type("AWS::S3::Bucket"):
        props = resolver.properties(stack, lid)
        name = resolver.physical_id(stack, lid)
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": world.region})
        if props.get("VersioningConfiguration", {}).get("Status") == "Enabled":
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        if props.get("NotificationConfiguration", {}).get("EventBridgeConfiguration", {}).get("EventBridgeEnabled"):
            s3.put_bucket_notification_configuration(
                Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}}
            )
        dep.buckets[lid] = name
    for lid in tpl.of_type("AWS::SNS::Topic"):  # created under the ARN the Lambdas' environment resolves to
        arn = str(resolver.physical_id(stack, lid))
        made = world.client("sns").create_topic(Name=arn.rsplit(":", 1)[-1])["TopicArn"]
        if made != arn:
            raise DeployError(f"SNS topic {lid}: created as {made}, the templates name {arn}")
        dep.topics[lid] = arn
    for lid in tpl.of_type("AWS::Logs::LogGroup"):
        name = resolver.physical_id(stack, lid)
        world.client("logs").create_log_group(logGroupName=name)
    for lid in tpl.of_type("AWS::DynamoDB::Table"):
        props = resolver.properties(stack, lid)
        name = resolver.physical_id(stack, lid)
        world.client("dynamodb").create_table(
            TableName=name,
            KeySchema=props["KeySchema"],
            AttributeDefinitions=props["AttributeDefinitions"],
            BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"),
        )
        dep.tables[lid] = name
    for lid in tpl.of_type("AWS::EC2::Volume"):
        props = resolver.properties(stack, lid)
        vol = world.client("ec2").create_volume(
            AvailabilityZone=props["AvailabilityZone"],
            Size=int(props.get("Size", 8)),
            VolumeType=props.get("VolumeType", "gp3"),
        )
        resolver.set_physical_id(stack, lid, vol["VolumeId"])
    for lid in tpl.of_type("AWS::EC2::Instance"):
        _create_instance(world, tpl, lid, resolver, dep, ami_id)
    for lid in tpl.of_type("AWS::EC2::LaunchTemplate"):
        _create_launch_template(world, tpl, lid, resolver, dep, ami_id)
    for lid in tpl.of_type("AWS::SSM::Parameter"):
        props = resolver.properties(stack, lid)
        ssm.put_parameter(
            Name=props["Name"], Value=str(props["Value"]), Type=props.get("Type", "String"), Overwrite=True
        )
        dep.parameters[props["Name"]] = str(props["Value"])
    for lid, res in tpl.of_type("AWS::Lambda::Function").items():
        if not str(res.properties.get("Handler", "")).startswith("control_plane."):
            continue  # CDK's own custom-resource providers: not part of the run
        props = resolver.properties(stack, lid)
        code = props["Code"]
        fn = FunctionRecord(
            stack,
            lid,
            resolver.physical_id(stack, lid),
            str(resolver.get_att(stack, lid, "Arn")),
            props["Handler"],
            _asset_dir(dep.assembly, resolver.env, code["S3Bucket"], code["S3Key"]),
            {k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()},
            int(props.get("Timeout", 3)),
            int(props.get("MemorySize", 128)),
            _role_logical_id(tpl, res_props=tpl.resources[lid].properties, key="Role"),
        )
        dep.functions[props["Handler"].rsplit(".", 2)[-2]] = fn
    for lid in tpl.of_type("AWS::StepFunctions::StateMachine"):
        _create_state_machine(world, tpl, lid, resolver, dep)


def _role_logical_id(tpl: Template, res_props: dict[str, Any], key: str) -> str:
    ref = res_props.get(key)
    if isinstance(ref, dict) and "Fn::GetAtt" in ref:
        return ref["Fn::GetAtt"][0]
    if isinstance(ref, dict) and "Ref" in ref:
        return ref["Ref"]
    raise DeployError(f"{tpl.stack_name}: {key} is not a role of this template: {ref!r}")


def _create_instance(
    world: MotoWorld, tpl: Template, lid: str, resolver: Resolver, dep: Deployment, stub_ami: str
) -> None:
    stack = tpl.stack_name
    props = resolver.properties(stack, lid)
    tags = [{"Key": t["Key"], "Value": str(t["Value"])} for t in props.get("Tags", [])]
    role = next((t["Value"] for t in tags if t["Key"] == "neuronpipe:role"), None)
    if role is None:
        raise DeployError(f"{stack}: {lid}: instance has no neuronpipe:role tag")
    user_data = base64.b64decode(props.get("UserData", "")).decode() if props.get("UserData") else ""
    profile_lid = tpl.resources[lid].properties["IamInstanceProfile"]["Ref"]
    role_lid = tpl.resources[profile_lid].properties["Roles"][0]["Ref"]
    image_id = str(props["ImageId"])
    if image_id.startswith(RESOLVE_SSM):  # EC2 resolves the public DLAMI parameter at launch: here, the stub
        image_id = stub_ami
    out = world.client("ec2").run_instances(
        ImageId=image_id,
        InstanceType=props["InstanceType"],
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": props["AvailabilityZone"]},
        DisableApiTermination=bool(props.get("DisableApiTermination", False)),
        InstanceInitiatedShutdownBehavior=props.get("InstanceInitiatedShutdownBehavior", "stop"),
        MetadataOptions={
            k: v
            for k, v in props.get("MetadataOptions", {}).items()
            if k in ("HttpTokens", "HttpEndpoint", "HttpPutResponseHopLimit")
        },
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    iid = out["Instances"][0]["InstanceId"]
    resolver.set_physical_id(stack, lid, iid)
    dep.instances[role] = InstanceRecord(
        stack,
        lid,
        iid,
        role,
        props["InstanceType"],
        props["AvailabilityZone"],
        image_id,
        resolver.physical_id(stack, role_lid),
        role_lid,
        user_data,
    )


def _create_launch_template(
    world: MotoWorld, tpl: Template, lid: str, resolver: Resolver, dep: Deployment, stub_ami: str
) -> None:
    stack = tpl.stack_name
    props = resolver.properties(stack, lid)
    data = dict(props["LaunchTemplateData"])
    template_image = str(data.get("ImageId", ""))
    if template_image.startswith(RESOLVE_SSM):  # EC2 resolves the public DLAMI parameter at launch: here, the stub
        data["ImageId"] = stub_ami
    profile_lid, role_lid = _instance_profile_of(tpl, tpl.resources[lid].properties["LaunchTemplateData"])
    profile, role = _create_instance_profile(world, tpl, profile_lid, role_lid, resolver)
    name = str(props["LaunchTemplateName"])
    made = world.client("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData=data,
        VersionDescription=str(props.get("VersionDescription", "")),
        TagSpecifications=props.get("TagSpecifications", []),
    )["LaunchTemplate"]
    resolver.set_physical_id(stack, lid, made["LaunchTemplateId"])
    instance_tags = {
        t["Key"]: str(t["Value"])
        for spec in data.get("TagSpecifications", [])
        if spec.get("ResourceType") == "instance"
        for t in spec.get("Tags", [])
    }
    itype = str(data["InstanceType"])
    if itype not in CATALOGUE:
        raise DeployError(f"{stack}: {lid}: launch template {name} is for {itype}, not a catalogued type")
    if "neuronpipe:role" not in instance_tags:
        raise DeployError(f"{stack}: {lid}: launch template {name} tags its instances with no neuronpipe:role")
    user_data = base64.b64decode(data["UserData"]).decode() if data.get("UserData") else ""
    dep.launch_templates[name] = LaunchTemplateRecord(
        stack,
        lid,
        name,
        made["LaunchTemplateId"],
        itype,
        CATALOGUE[itype].family,
        instance_tags["neuronpipe:role"],
        str(data["ImageId"]),
        template_image,
        role,
        role_lid,
        profile,
        tuple(str(g) for g in data.get("SecurityGroupIds", [])),
        instance_tags,
        user_data,
    )


def _instance_profile_of(tpl: Template, data: dict[str, Any]) -> tuple[str, str]:
    """(instance profile, role) logical ids a launch template's IamInstanceProfile names (this template's)."""
    ref = data.get("IamInstanceProfile") or {}
    ref = ref.get("Arn") or ref.get("Name")
    lid = (
        ref["Fn::GetAtt"][0]
        if isinstance(ref, dict) and "Fn::GetAtt" in ref
        else ref["Ref"]
        if isinstance(ref, dict) and "Ref" in ref
        else None
    )
    if lid is None or tpl.resources.get(lid) is None or tpl.resources[lid].type != "AWS::IAM::InstanceProfile":
        raise DeployError(
            f"{tpl.stack_name}: a launch template's IamInstanceProfile is not an instance profile of "
            f"this template: {ref!r}"
        )
    return lid, _role_logical_id(tpl, {"Role": tpl.resources[lid].properties["Roles"][0]}, "Role")


def _create_instance_profile(
    world: MotoWorld, tpl: Template, profile_lid: str, role_lid: str, resolver: Resolver
) -> tuple[str, str]:
    """The role and its instance profile in moto's IAM (once): RunInstances with the profile finds them."""
    stack, iam = tpl.stack_name, world.client("iam")
    profile, role = resolver.physical_id(stack, profile_lid), resolver.physical_id(stack, role_lid)
    if not any(p["InstanceProfileName"] == profile for p in iam.list_instance_profiles()["InstanceProfiles"]):
        role_props = resolver.properties(stack, role_lid)
        iam.create_role(
            RoleName=role,
            Path=role_props.get("Path", "/"),
            AssumeRolePolicyDocument=json.dumps(role_props["AssumeRolePolicyDocument"]),
        )
        profile_props = resolver.properties(stack, profile_lid)
        iam.create_instance_profile(InstanceProfileName=profile, Path=profile_props.get("Path", "/"))
        iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role)
    return profile, role


def _create_state_machine(world: MotoWorld, tpl: Template, lid: str, resolver: Resolver, dep: Deployment) -> None:
    from statemachine.build import substitute

    stack = tpl.stack_name
    props = resolver.properties(stack, lid)
    definition = props["DefinitionString"]
    if not isinstance(definition, str):
        definition = json.dumps(definition)
    definition = substitute(definition, {k: str(v) for k, v in props.get("DefinitionSubstitutions", {}).items()})
    name = resolver.physical_id(stack, lid).rsplit(":", 1)[-1]
    arn = world.client("stepfunctions").create_state_machine(
        name=name, definition=definition, roleArn=props["RoleArn"]
    )["stateMachineArn"]
    dep.state_machine_arn, dep.state_machine_definition = arn, definition
    dep.state_machine_role_logical_id = _role_logical_id(tpl, tpl.resources[lid].properties, "RoleArn")


def clear(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
