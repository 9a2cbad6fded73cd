"""Athena over the results store, for a team that shares the bucket: a Glue database and tables over the store's
layout, a workgroup with its own results prefix and a bytes-scanned limit it enforces, and a query role that reads
only what a query needs.

* Tables (``analytics.athena``): ``stored_<table>`` (Parquet) over ``results/v1/<table>/`` for every table of
  ``analytics.schema.TABLES``, columns from its Arrow schema; ``commit_marker_lines`` and
  ``quarantine_record_lines`` (text, one row per line) over the commit markers and quarantine records. None is
  partitioned: a (run, lane) folder holds every attempt, so the committed layer's views (``00_committed.sql`` of
  ``analytics/athena/views``) choose files by the markers, and no partition needs registering at commit.
* The views (committed layer, then the DuckDB views transpiled) are DDL run through this workgroup by
  ``python -m control_plane.athena_views`` with an operator's credentials: the query role cannot create or change one.
* Workgroup: results under ``s3://<bucket>/athena-results/`` (SSE-S3, expired after ``athena_results_days``), each
  query cancelled past ``athena_bytes_scanned_cutoff_mb``, the configuration enforced (a client cannot pick
  another output location or lift the limit), Athena engine 3.
* Query role (``AthenaQueryRole``): Athena query actions on this workgroup only; Glue reads on this database and
  its tables only; S3 reads of the table folders, the commit markers and the quarantine records (not
  ``_proposed``, ``_seq``, ``models/`` or ``logs/``), and read-write of the workgroup's results prefix only.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Duration
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from analytics.athena import (
    MARKER_LINES,
    MARKER_PREFIX,
    QUARANTINE_LINES,
    QUARANTINE_PREFIX,
    glue_columns,
    stored_table,
    table_prefix,
)
from analytics.schema import TABLES
from infra.config import ATHENA_RESULTS_PREFIX, RESULTS_PREFIX, DeploymentSettings
from infra.stacks.base import nag_results_arn, results_arn, results_bucket_name
from infra.stacks.nag import acknowledge

PARQUET = {
    "input_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "serde": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
}
TEXT = {
    "input_format": "org.apache.hadoop.mapred.TextInputFormat",
    "output_format": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "serde": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
}
QUERY_ACTIONS = (
    "athena:StartQueryExecution",
    "athena:GetQueryExecution",
    "athena:GetQueryResults",
    "athena:StopQueryExecution",
    "athena:GetWorkGroup",
)
GLUE_READ_ACTIONS = ("glue:GetDatabase", "glue:GetTable", "glue:GetTables", "glue:GetPartition", "glue:GetPartitions")
MiB = 1024 * 1024


class AthenaAnalytics(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, settings: DeploymentSettings, bucket: s3.IBucket
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        root = f"s3://{results_bucket_name(settings)}/{RESULTS_PREFIX}/"
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=settings.athena_database,
                description="neuron-pipelines results store: stored_* tables hold every file, committed or not; "
                "query the views (analytics/athena/views), which keep the committed attempts only",
            ),
        )
        self.tables: dict[str, glue.CfnTable] = {}
        for table in sorted(TABLES):
            columns = [
                glue.CfnTable.ColumnProperty(name=name, type=type_, comment=doc or None)
                for name, type_, doc in glue_columns(table)
            ]
            self._table(stored_table(table), f"{root}{table_prefix(table)}", columns, PARQUET, table)
        line = [glue.CfnTable.ColumnProperty(name="line", type="string", comment="one line of the file")]
        self._table(MARKER_LINES, f"{root}{MARKER_PREFIX}", line, TEXT, "commit markers, one row per line")
        self._table(QUARANTINE_LINES, f"{root}{QUARANTINE_PREFIX}", line, TEXT, "quarantine records, one row per line")

        if isinstance(bucket, s3.Bucket):  # a bucket this stack creates (an imported one keeps its own rules)
            bucket.add_lifecycle_rule(
                id="athena-results",
                prefix=ATHENA_RESULTS_PREFIX,
                expiration=Duration.days(settings.athena_results_days),
            )
        self.results_location = f"s3://{results_bucket_name(settings)}/{ATHENA_RESULTS_PREFIX}"
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=settings.athena_workgroup,
            description="neuron-pipelines: queries over the results store (neuronpipe query --engine athena)",
            state="ENABLED",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                bytes_scanned_cutoff_per_query=settings.athena_bytes_scanned_cutoff_mb * MiB,
                publish_cloud_watch_metrics_enabled=True,
                requester_pays_enabled=False,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version="Athena engine version 3"
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=self.results_location,
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                    expected_bucket_owner=Aws.ACCOUNT_ID,
                ),
            ),
        )
        self.query_role = self._query_role()
        prefix = settings.parameter_prefix
        ssm.StringParameter(
            self,
            "WorkGroupName",
            parameter_name=f"{prefix}/athena/workgroup",
            string_value=settings.athena_workgroup,
            description="Athena workgroup of `neuronpipe query --engine athena`",
        )
        ssm.StringParameter(
            self,
            "DatabaseName",
            parameter_name=f"{prefix}/athena/database",
            string_value=settings.athena_database,
            description="Glue database of the results store's tables and views",
        )
        CfnOutput(self, "AthenaQueryRoleArn", value=self.query_role.role_arn)

    def _table(self, name: str, location: str, columns: list, fmt: dict[str, str], description: str) -> glue.CfnTable:
        table = glue.CfnTable(
            self,
            f"Table-{name}",
            catalog_id=Aws.ACCOUNT_ID,
            database_name=self.settings.athena_database,
            table_input=glue.CfnTable.TableInputProperty(
                name=name,
                description=description[:2048],
                table_type="EXTERNAL_TABLE",
                parameters={"classification": "parquet" if fmt is PARQUET else "text", "EXTERNAL": "TRUE"},
                partition_keys=[],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    columns=columns,
                    location=location,
                    input_format=fmt["input_format"],
                    output_format=fmt["output_format"],
                    serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=fmt["serde"]),
                ),
            ),
        )
        table.node.add_dependency(self.database)
        self.tables[name] = table
        return table

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{Aws.PARTITION}:{service}:{self.settings.region}:{Aws.ACCOUNT_ID}:{resource}"

    def _query_role(self) -> iam.Role:
        db = self.settings.athena_database
        role = iam.Role(
            self,
            "QueryRole",
            assumed_by=iam.AccountRootPrincipal(),
            description="neuronpipe query --engine athena: read the committed store through the workgroup",
            max_session_duration=Duration.hours(1),
        )
        store_reads = [f"{RESULTS_PREFIX}/{table_prefix(t)}*" for t in sorted(TABLES)]
        store_reads += [f"{RESULTS_PREFIX}/{MARKER_PREFIX}*", f"{RESULTS_PREFIX}/{QUARANTINE_PREFIX}*"]
        statements = [
            iam.PolicyStatement(
                sid="QueryInTheWorkgroup",
                actions=list(QUERY_ACTIONS),
                resources=[self.arn("athena", f"workgroup/{self.settings.athena_workgroup}")],
            ),
            iam.PolicyStatement(
                sid="ReadTheCatalogOfTheStore",
                actions=list(GLUE_READ_ACTIONS),
                resources=[
                    self.arn("glue", "catalog"),
                    self.arn("glue", f"database/{db}"),
                    self.arn("glue", f"table/{db}/*"),
                ],
            ),
            iam.PolicyStatement(
                sid="ReadTheStoresTablesAndMarkers",
                actions=["s3:GetObject"],
                resources=[results_arn(self.settings, k) for k in store_reads],
            ),
            iam.PolicyStatement(
                sid="ListTheStoresTablesAndMarkers",
                actions=["s3:ListBucket"],
                resources=[results_arn(self.settings)],
                conditions={"StringLike": {"s3:prefix": [*store_reads, f"{ATHENA_RESULTS_PREFIX}*"]}},
            ),
            iam.PolicyStatement(
                sid="LocateTheBucket",
                actions=["s3:GetBucketLocation"],
                resources=[results_arn(self.settings)],
            ),
            iam.PolicyStatement(
                sid="WriteAndReadQueryResults",
                actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                resources=[results_arn(self.settings, f"{ATHENA_RESULTS_PREFIX}*")],
            ),
        ]
        policy = iam.ManagedPolicy(self, "QueryPolicy", statements=statements, roles=[role])
        folders = ", ".join(k.removesuffix("*") for k in store_reads)
        acknowledge(
            policy,
            "IAM5",
            "Athena reads the objects under the store's table folders, commit markers and quarantine records "
            f"({folders}): one file per attempt, named at run time, so no key is known at deploy.",
            findings=[nag_results_arn(self.settings, k) for k in store_reads],
        )
        acknowledge(
            policy,
            "IAM5",
            f"The workgroup writes each query's result under {ATHENA_RESULTS_PREFIX} (one object per query id, "
            "named at run time); the query role reads it back from there only.",
            findings=[nag_results_arn(self.settings, f"{ATHENA_RESULTS_PREFIX}*")],
        )
        acknowledge(
            policy,
            "IAM5",
            "Glue reads of the tables of this one database: the views are created after deploy "
            "(python -m control_plane.athena_views), so their names are not known here.",
            findings=[f"Resource::arn:<AWS::Partition>:glue:{self.settings.region}:<AWS::AccountId>:table/{db}/*"],
        )
        return role
