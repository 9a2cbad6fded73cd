"""What one request asks IAM: the actions and resources AWS would evaluate for it, and its condition keys."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

# moto's action name -> the IAM action AWS evaluates
ACTION_ALIASES = {
    "s3:HeadBucket": "s3:ListBucket",
    "s3:ListObjects": "s3:ListBucket",
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:CreateMultipartUpload": "s3:PutObject",
    "s3:UploadPart": "s3:PutObject",
    "s3:CompleteMultipartUpload": "s3:PutObject",
    "s3:DeleteObjects": "s3:DeleteObject",
    "lambda:Invoke": "lambda:InvokeFunction",
}


def request_checks(
    action: str, resource: str, data: Mapping[str, Any], body: bytes | None, path: str, region: str, account: str
) -> list[tuple[str, str | None]]:
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
        verbs = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
            "Get": "GetItem",
        }
        return [
            (f"dynamodb:{verbs[op]}", arn("dynamodb", f"table/{spec['TableName']}"))
            for item in p.get("TransactItems", [])
            for op, spec in item.items()
        ]
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


def request_context(action: str, path: str) -> dict[str, str | None]:
    """The condition keys the rehearsal can read from a request: ``s3:prefix`` of a bucket listing."""
    if action == "s3:ListBucket":
        prefix = parse_qs(urlparse(path).query, keep_blank_values=True).get("prefix")
        return {"s3:prefix": prefix[0] if prefix else None}
    return {}
