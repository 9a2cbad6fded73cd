"""Athena over the results store (infra/stacks/athena.py): the Glue database and tables over the store's layout, the
workgroup's limits, and the query role's least privilege. Templates only: Athena itself has not run here."""

from __future__ import annotations

from typing import Any

from analytics.athena import MARKER_LINES, QUARANTINE_LINES, glue_columns, stored_table
from analytics.schema import TABLES
from infra.config import STACK_BASE
from tests.support.cfn import as_list, flat

MiB = 1024 * 1024


def _one(synthesized, type_: str) -> dict[str, Any]:
    (resource,) = synthesized.resources(STACK_BASE, type_).values()
    return resource["Properties"]


def _tables(synthesized) -> dict[str, dict[str, Any]]:
    out = {}
    for r in synthesized.resources(STACK_BASE, "AWS::Glue::Table").values():
        props = r["Properties"]
        out[props["TableInput"]["Name"]] = props
    return out


def test_a_glue_database_holds_one_unpartitioned_parquet_table_per_store_table(synthesized):
    db = synthesized.settings.athena_database
    assert _one(synthesized, "AWS::Glue::Database")["DatabaseInput"]["Name"] == db
    tables = _tables(synthesized)
    assert set(tables) == {stored_table(t) for t in TABLES} | {MARKER_LINES, QUARANTINE_LINES}
    for table in TABLES:
        props = tables[stored_table(table)]
        assert props["DatabaseName"] == db
        sd = props["TableInput"]["StorageDescriptor"]
        assert flat(sd["Location"]).endswith(f"/results/v1/{table}/") and flat(sd["Location"]).startswith("s3://")
        assert "parquet" in sd["SerdeInfo"]["SerializationLibrary"].lower()
        assert [(c["Name"], c["Type"]) for c in sd["Columns"]] == [(n, t) for n, t, _ in glue_columns(table)]
        assert props["TableInput"].get("PartitionKeys", []) == []  # the views choose committed files, not partitions


def test_the_marker_and_quarantine_tables_read_lines_of_text(synthesized):
    tables = _tables(synthesized)
    for name, folder in ((MARKER_LINES, "/results/v1/_commits/"), (QUARANTINE_LINES, "/results/v1/_quarantine/")):
        sd = tables[name]["TableInput"]["StorageDescriptor"]
        assert flat(sd["Location"]).endswith(folder)
        assert [(c["Name"], c["Type"]) for c in sd["Columns"]] == [("line", "string")]
        assert sd["InputFormat"].endswith("TextInputFormat")


def test_the_workgroup_enforces_its_results_prefix_and_bytes_scanned_limit(synthesized):
    wg = _one(synthesized, "AWS::Athena::WorkGroup")
    assert wg["Name"] == synthesized.settings.athena_workgroup
    cfg = wg["WorkGroupConfiguration"]
    assert cfg["EnforceWorkGroupConfiguration"] is True
    assert cfg["BytesScannedCutoffPerQuery"] == synthesized.settings.athena_bytes_scanned_cutoff_mb * MiB
    assert cfg["EngineVersion"]["SelectedEngineVersion"] == "Athena engine version 3"
    result = cfg["ResultConfiguration"]
    assert flat(result["OutputLocation"]).endswith("/athena-results/")
    assert result["EncryptionConfiguration"]["EncryptionOption"] == "SSE_S3"
    rules = _bucket_rules(synthesized)
    assert any(r.get("Prefix") == "athena-results/" and r.get("ExpirationInDays") for r in rules)


def _bucket_rules(synthesized) -> list[dict[str, Any]]:
    for r in synthesized.resources(STACK_BASE, "AWS::S3::Bucket").values():
        if "VersioningConfiguration" in r["Properties"]:
            return r["Properties"]["LifecycleConfiguration"]["Rules"]
    raise AssertionError("no results bucket")


def test_the_cli_finds_the_workgroup_and_database_in_ssm(synthesized):
    params = {
        p["Properties"]["Name"]: p["Properties"]["Value"]
        for p in synthesized.resources(STACK_BASE, "AWS::SSM::Parameter").values()
    }
    assert params["/neuronpipe/athena/workgroup"] == synthesized.settings.athena_workgroup
    assert params["/neuronpipe/athena/database"] == synthesized.settings.athena_database


def test_the_query_role_reads_the_committed_store_and_writes_only_query_results(synthesized):
    (policy,) = synthesized.resources(STACK_BASE, "AWS::IAM::ManagedPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    db, wg = synthesized.settings.athena_database, synthesized.settings.athena_workgroup
    store_objects = {f"/results/v1/{t}/*" for t in TABLES} | {"/results/v1/_commits/*", "/results/v1/_quarantine/*"}
    for st in statements:
        assert st["Effect"] == "Allow"
        actions = as_list(st["Action"])
        resources = [flat(r) for r in as_list(st["Resource"])]
        assert "*" not in resources and not any(a.endswith(":*") or a == "*" for a in actions), st
        service = {a.split(":")[0] for a in actions}
        assert len(service) == 1, st
        if service == {"athena"}:
            assert resources == [r for r in resources if r.endswith(f":workgroup/{wg}")] and resources
            assert set(actions) <= {
                "athena:StartQueryExecution",
                "athena:GetQueryExecution",
                "athena:GetQueryResults",
                "athena:StopQueryExecution",
                "athena:GetWorkGroup",
            }
        elif service == {"glue"}:
            assert all(a.split(":")[1].startswith("Get") for a in actions), st  # no Create/Update/Delete
            assert all(r.endswith((":catalog", f":database/{db}", f":table/{db}/*")) for r in resources), resources
        else:
            assert service == {"s3"}
            writes = [a for a in actions if a in ("s3:PutObject", "s3:AbortMultipartUpload")]
            objects = [r.split(":::", 1)[1].split("/", 1)[1] for r in resources if "/" in r.split(":::", 1)[1]]
            if writes:
                assert objects == ["athena-results/*"], st
            elif "s3:GetObject" in actions:
                assert {f"/{o}" for o in objects} <= store_objects, st
            if "s3:ListBucket" in actions:
                prefixes = set(st["Condition"]["StringLike"]["s3:prefix"])
                assert prefixes <= {p.lstrip("/") for p in store_objects} | {"athena-results/*"}, prefixes
    readable = {
        r
        for st in statements
        if "s3:GetObject" in as_list(st["Action"])
        for r in (flat(x) for x in as_list(st["Resource"]))
    }
    for private in ("_proposed", "_seq", "/models/", "/logs/"):  # bucket folders, not a table named *_models
        assert not any(private in r for r in readable), private
    (role,) = [
        r["Properties"]
        for r in synthesized.resources(STACK_BASE, "AWS::IAM::Role").values()
        if "--engine athena" in r["Properties"].get("Description", "")
    ]
    assert role["MaxSessionDuration"] == 3600
    assert "Policies" not in role and "ManagedPolicyArns" not in role  # only the policy above, attached to it
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRole" and ":root" in flat(trust["Principal"]["AWS"])
