"""Issue 29: instance types as data, a run matrix expanded into cells, each cell a launched segment, priced, its
quotas stated; refusals in one line, nothing started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.cost import CostCeilingError
from control_plane.matrix_plan import Fleet, FleetPlanError
from control_plane.models import RunRequest, RunRequestError, parse_request
from control_plane.plan import plan_run
from control_plane.quotas import QuotaExceededError, QuotaUnreadableError, ServiceQuotas, check_quotas
from pipeline.instance_types import (
    CATALOGUE,
    NoPriceError,
    UnknownInstanceTypeError,
    get_instance_type,
    instance_type_names,
)
from pipeline.matrix import MatrixError, expand_cells, parse_matrix

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "run-matrix.json"
FLEET = Fleet(("subnet-a", "subnet-b"), "neuronpipe-fleet", "neuron-pipelines")


def request(**matrix):
    return parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep"],
            "models": ["llama-3.1-8b-instruct"],
            "server_configs": ["A", "B"],
            "profile": "tiny",
            "max_cost_usd": 50,
            "matrix": {"instance_types": ["inf2.xlarge", "g6.xlarge", "g5.xlarge"], **matrix},
        }
    )


def test_the_catalogue_states_each_type_and_refuses_an_unknown_one_listing_the_known():
    assert {
        "inf2.xlarge",
        "inf2.48xlarge",
        "trn1.2xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
        "g5.xlarge",
        "g6e.xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
    } <= set(CATALOGUE)
    inf2 = get_instance_type("inf2.8xlarge")
    assert (inf2.family, inf2.backend, inf2.cores, inf2.vcpus, inf2.can_train) == (
        "neuron-inf2",
        "neuron",
        2,
        32,
        False,
    )
    assert inf2.ami.image_id.startswith("resolve:ssm:/aws/service/neuron/")
    g6 = get_instance_type("g6.xlarge")
    assert g6.backend == "cuda" and g6.quota_code == "L-DB2E81BA" and g6.box_kinds == ("trn1", "inf2")
    assert get_instance_type("p5.48xlarge").quota_name == "Running On-Demand P instances"
    with pytest.raises(UnknownInstanceTypeError) as err:
        get_instance_type("x9.huge")
    assert "catalogued types: " + ", ".join(instance_type_names()) in str(err.value)
    with pytest.raises(NoPriceError, match="no on-demand price recorded for trn2.48xlarge in us-west-2"):
        get_instance_type("trn2.48xlarge").price("us-west-2")


def test_cells_are_every_combination_less_the_excluded_numbered_in_a_stable_order():
    spec = parse_matrix(
        {
            "instance_types": ["inf2.xlarge", "g6.xlarge"],
            "exclude": [{"instance_type": "g6.xlarge", "server_config": "B"}],
        }
    )
    cells = expand_cells(spec, models=["llama-3.1-8b-instruct"], server_configs=["A", "B"], workloads={})
    assert [(c.cell, c.instance_type, c.server_config) for c in cells] == [
        ("c01", "inf2.xlarge", "A"),
        ("c02", "inf2.xlarge", "B"),
        ("c03", "g6.xlarge", "A"),
    ]
    with pytest.raises(MatrixError, match="every cell is excluded"):
        expand_cells(
            parse_matrix({"instance_types": ["g6.xlarge"], "exclude": [{"instance_type": "g6.xlarge"}]}),
            models=["m"],
            server_configs=["A"],
            workloads={},
        )
    with pytest.raises(MatrixError, match="matrix.workloads: 'chat' is not a workload of the request"):
        expand_cells(
            parse_matrix({"instance_types": ["g6.xlarge"], "workloads": ["chat"]}),
            models=["m"],
            server_configs=["A"],
            workloads={},
        )


@pytest.mark.parametrize(
    "matrix, message",
    [
        (
            {"instance_types": ["x9.huge"]},
            "matrix: instance_types: unknown instance type 'x9.huge'; catalogued types: ",
        ),
        ({"instance_types": ["g6.xlarge", "g6.xlarge"]}, "matrix: instance_types: listed twice: g6.xlarge"),
        ({"instance_types": ["g6.xlarge"], "lanes": ["sft"]}, "'sft' is not a serving lane"),
        ({"instance_types": ["g6.xlarge"], "colour": "red"}, "matrix: colour: Extra inputs are not permitted"),
    ],
)
def test_a_bad_matrix_is_refused_in_one_line(matrix, message):
    with pytest.raises(RunRequestError) as err:
        parse_request({"lanes": ["serve_sweep"], "matrix": matrix})
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_each_cell_is_a_launched_segment_tagged_with_the_run_and_its_lanes_commit_per_cell():
    plan = plan_run(request(), run_id="m1", results_uri="s3://bkt/results", fleet=FLEET)
    assert plan.box_roles == [] and plan.instance_ids == {}  # no pinned box: every lane left is a cell's
    [wave] = plan.waves
    assert [s.box for s in wave.segments] == [f"c0{i}" for i in range(1, 7)]
    seg = wave.segments[2]
    assert seg.cell == {
        "cell": "c03",
        "instance_type": "g6.xlarge",
        "model": "llama-3.1-8b-instruct",
        "server_config": "A",
        "workload": None,
    }
    assert seg.launch.template == "neuronpipe-fleet-g6-xlarge" and seg.launch.subnets == ["subnet-a", "subnet-b"]
    tags = {t["Key"]: t["Value"] for t in seg.launch.tags}
    assert (
        tags["neuronpipe:run"] == "m1" and tags["neuronpipe:cell"] == "c03" and tags["neuronpipe:ephemeral"] == "true"
    )
    assert not seg.release_lease and seg.instance_id is None and seg.run_id == "m1"
    assert [st.result_lane for st in seg.lanes] == ["provenance@c03", "preflight@c03", "serve_sweep@c03"]
    assert seg.lanes[2].needs == ["preflight@c03"]  # the cell's own gate
    assert "export NEURONPIPE_CELL=c03" in seg.lanes[2].script
    assert '"server_configs": ["A"]' in seg.lanes[2].script
    assert "boot.done" in seg.sync.script  # the sync waits for the first boot to install the harness
    # priced per type: inf2.xlarge $0.76/h, g6.xlarge $0.8048/h, for the same lanes' worst case
    assert wave.segments[0].max_cost_usd < wave.segments[2].max_cost_usd
    assert plan.max_concurrency == 4 and len(plan.cells) == 6
    assert plan.execution_input()["max_concurrency"] == 4
    assert plan.execution_input()["cells"] == [c["cell"] for c in plan.cells]


def test_lanes_that_need_a_pinned_box_stay_on_it_and_a_cell_waits_for_its_producer():
    req = parse_request(
        {
            "lanes": ["provenance", "preflight", "sft", "merge", "quality"],
            "models": ["llama-3.1-8b-instruct"],
            "profile": "tiny",
            "max_cost_usd": 50,
            "matrix": {"instance_types": ["inf2.xlarge", "g6.xlarge"], "server_configs": ["A"]},
        }
    )
    plan = plan_run(req, run_id="m2", results_uri="s3://bkt/results", fleet=FLEET)
    assert plan.box_roles == ["trn1"]
    w0, w1 = plan.waves
    assert [s.box for s in w0.segments] == ["trn1"] and [s.box for s in w1.segments] == ["c01", "c02"]
    quality = w1.segments[0].lanes[-1]
    assert quality.result_lane == "quality@c01" and "merge" in quality.needs
    # one cell runs once: its prelude moves to the wave it runs in
    assert [st.result_lane for st in w1.segments[0].lanes] == ["provenance@c01", "preflight@c01", "quality@c01"]
    assert plan.max_concurrency == 2 + 1  # the pinned box never waits for a cell's slot


def test_the_plan_states_the_quotas_it_needs_and_a_quota_too_small_refuses_it():
    plan = plan_run(request(max_concurrency=2), run_id="m3", results_uri="s3://bkt/results", fleet=FLEET)
    needs = {q["quota_code"]: q for q in plan.quota_needs}
    # at most two cells at once: the two largest of each family
    assert needs["L-1945791B"]["vcpus"] == 4 + 4 and needs["L-DB2E81BA"]["vcpus"] == 4 + 4

    class Client:
        def __init__(self, values):
            self.values = values

        def get_service_quota(self, ServiceCode, QuotaCode):
            return {"Quota": {"Value": self.values[QuotaCode]}}

    checks = check_quotas(plan.quota_needs, ServiceQuotas(Client({"L-1945791B": 8, "L-DB2E81BA": 64})))
    assert all(c.ok for c in checks)
    with pytest.raises(QuotaExceededError) as err:
        check_quotas(plan.quota_needs, ServiceQuotas(Client({"L-1945791B": 4, "L-DB2E81BA": 64})))
    assert str(err.value) == (
        "quota: Running On-Demand Inf instances (ec2/L-1945791B): needs 8 vCPUs at once, the "
        "quota allows 4 (applied); lower matrix.max_concurrency or ask AWS for more"
    )

    class Denied:
        def get_service_quota(self, **_):
            raise PermissionError("AccessDenied")

    with pytest.raises(QuotaUnreadableError, match="quota ec2/L-1945791B: PermissionError: AccessDenied"):
        check_quotas(plan.quota_needs, ServiceQuotas(Denied()))


def test_a_matrix_over_the_ceiling_a_type_without_a_price_or_no_subnets_is_refused():
    with pytest.raises(CostCeilingError, match=r"worst case \$\d+\.\d\d exceeds the ceiling \$20\.00"):
        plan_run(
            parse_request({**request().model_dump(exclude_none=True), "max_cost_usd": 20}),
            run_id="m4",
            results_uri="s3://bkt/results",
            fleet=FLEET,
        )
    trn2 = parse_request(
        {"lanes": ["serve_sweep"], "matrix": {"instance_types": ["trn2.48xlarge"]}, "max_cost_usd": 50}
    )
    with pytest.raises(FleetPlanError, match="matrix: cell c01: no on-demand price recorded for trn2.48xlarge"):
        plan_run(trn2, run_id="m5", results_uri="s3://bkt/results", fleet=FLEET)
    with pytest.raises(FleetPlanError, match="no subnets to launch cells in"):
        plan_run(request(), run_id="m6", results_uri="s3://bkt/results", fleet=Fleet(()))


def test_a_cell_whose_type_runs_none_of_its_lanes_is_refused(monkeypatch):
    import pipeline.instance_types as it

    monkeypatch.setitem(
        it.CATALOGUE, "g6.xlarge", it.CATALOGUE["g6.xlarge"].model_copy(update={"can_serve": False, "can_train": False})
    )
    with pytest.raises(
        FleetPlanError,
        match=r"matrix: cell c03 \(g6.xlarge .*\): its type runs none of the cell's "
        r"lanes \(serve_sweep\)",
    ):
        plan_run(request(), run_id="m7", results_uri="s3://bkt/results", fleet=FLEET)


def test_a_large_matrix_keeps_its_plan_in_s3_and_the_input_small():
    req = parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep"],
            "profile": "tiny",
            "server_configs": ["A", "B"],
            "max_cost_usd": 50,
            "matrix": {
                "instance_types": ["inf2.xlarge", "g6.xlarge", "g5.xlarge", "g6.2xlarge", "g5.2xlarge", "inf2.8xlarge"]
            },
        }
    )
    plan = plan_run(
        req.model_copy(update={"max_cost_usd": None}),
        run_id="m8",
        results_uri="s3://bkt/results",
        fleet=FLEET,
        ceiling_usd=1000,
    )
    assert len(plan.cells) == 24 and plan.needs_plan_in_s3
    data = plan.execution_input("s3://bkt/control/m8/plan.json", "sha256:" + "0" * 64)
    assert data["waves"] == [] and data["nodes"] == [] and data["plan_uri"].endswith("/control/m8/plan.json")
    assert data["plan_digest"] == "sha256:" + "0" * 64
    assert len(json.dumps(data)) < 8 * 1024
    doc = plan.plan_document()
    assert len(doc["waves"][0]["segments"]) == 24 and doc["nodes"]


def test_the_shipped_example_plans_four_cells_of_three_types():
    plan = plan_run(
        parse_request(EXAMPLE.read_text()), run_id="matrix-demo", results_uri="s3://bkt/results", fleet=FLEET
    )
    assert len(plan.cells) >= 4 and len({c["instance_type"] for c in plan.cells}) >= 3
    assert {get_instance_type(c["instance_type"]).family for c in plan.cells} >= {"neuron-inf2", "cuda"}


def test_progress_follows_a_cell_from_its_launch_to_its_lanes_and_its_termination():
    from control_plane.progress import progress_from_history

    plan = plan_run(request(max_concurrency=2), run_id="m9", results_uri="s3://bkt/results", fleet=FLEET)
    data = plan.execution_input()
    seg = data["waves"][0]["segments"][0]
    history = [
        {"id": 1, "type": "ExecutionStarted", "executionStartedEventDetails": {"input": json.dumps(data)}},
        {
            "id": 2,
            "previousEventId": 1,
            "type": "TaskScheduled",
            "taskScheduledEventDetails": {
                "resource": "runInstances",
                "parameters": json.dumps(
                    {"TagSpecifications": [{"ResourceType": "instance", "Tags": seg["launch"]["tags"]}]}
                ),
            },
        },
        {
            "id": 3,
            "previousEventId": 2,
            "type": "TaskSucceeded",
            "taskSucceededEventDetails": {"output": json.dumps({"Instances": [{"InstanceId": "i-0cell1"}]})},
        },
        {
            "id": 4,
            "previousEventId": 3,
            "type": "TaskScheduled",
            "taskScheduledEventDetails": {
                "resource": "sendCommand.waitForTaskToken",
                "parameters": json.dumps({"InstanceIds": ["i-0cell1"], "Comment": "neuronpipe provenance m9"}),
            },
        },
    ]
    progress = progress_from_history(history)
    boxes = {p.box_role: p for p in progress.phases}
    assert set(boxes) == {c["cell"] for c in plan.cells}
    assert boxes["c01"].instance_id == "i-0cell1" and boxes["c01"].state == "running lanes"
    lanes = {(lp.box_role, lp.lane): lp.status for lp in progress.lanes}
    assert lanes[("c01", "provenance")] == "running" and lanes[("c02", "provenance")] == "waiting"
    history += [
        {
            "id": 5,
            "previousEventId": 4,
            "type": "TaskScheduled",
            "taskScheduledEventDetails": {
                "resource": "terminateInstances",
                "parameters": json.dumps({"InstanceIds": ["i-0cell1"]}),
            },
        },
        {"id": 6, "previousEventId": 5, "type": "TaskSucceeded", "taskSucceededEventDetails": {"output": "{}"}},
    ]
    assert {p.box_role: p.state for p in progress_from_history(history).phases}["c01"] == "terminated"


def test_plan_prints_the_cells_the_wall_time_against_their_sum_and_the_quotas(capsys, monkeypatch):
    from control_plane.cli import main

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "none")
    assert main(["plan", "--input", str(EXAMPLE)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "matrix: 4 cells, each on its own ephemeral box, at most 4 boxes at once" in out
    # the models and configs the cells run (the matrix's axes), not the request's defaults (both models)
    assert "models: llama-3.1-8b-instruct server configs: A (the matrix axes)" in out
    assert "expected wall time of the cells" in out and "with 4 boxes at once)" in out
    # each cell's serving lane on its own family: a GPU cell pays no Neuron compile
    assert "estimate (family cuda): vLLM CUDA boot" in out and "anchor (family neuron): cold serving compile" in out
    assert "server configs on c03 (g6.xlarge) (family cuda" in out and "roofline (PREDICTED, not measured" in out
    assert "quota Running On-Demand Inf instances (ec2/L-1945791B, us-west-2): needs 36 vCPUs at once" in out
    for t in ("inf2.xlarge", "inf2.8xlarge", "g6.xlarge", "g5.xlarge"):
        assert "c0" in out and t in out


def test_a_plan_that_cannot_be_written_to_s3_or_a_quota_too_small_starts_nothing_and_takes_no_lease():
    from control_plane.launch import PlanStorageError, launch
    from control_plane.settings import ControlPlaneSettings

    class Executions:
        started: list = []

        def find_state_machine(self, name):
            return "arn:aws:states:us-west-2:1:stateMachine:m"

        def status(self, arn, run_id):
            return None

        def start(self, arn, run_id, data):
            self.started.append(run_id)
            return "arn:execution"

    class Leases:
        taken: list = []

        def take(self, boxes, run_id, ttl):
            self.taken.append(boxes)

        def release(self, boxes, run_id):
            pass

    class DeniedS3:
        def put_object(self, **_):
            raise PermissionError("AccessDenied: s3:PutObject")

    class Quotas:
        def __init__(self, value):
            self.value_ = value

        def get_service_quota(self, ServiceCode, QuotaCode):
            return {"Quota": {"Value": self.value_}}

    settings = ControlPlaneSettings(results_uri="s3://bkt/results", fleet_subnets="subnet-a,subnet-b")
    big = parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep"],
            "server_configs": ["A", "B"],
            "matrix": {
                "instance_types": ["inf2.xlarge", "g6.xlarge", "g5.xlarge", "g6.2xlarge", "g5.2xlarge", "inf2.8xlarge"]
            },
        }
    )
    settings_big = settings.model_copy(update={"max_cost_usd_ceiling": 1000.0})
    executions, leases = Executions(), Leases()
    with pytest.raises(PlanStorageError) as err:
        launch(
            big,
            "m10",
            settings_big,
            fleet=None,
            executions=executions,
            committed=None,
            leases=leases,
            quotas=ServiceQuotas(Quotas(10_000)),
            s3_client=DeniedS3(),
        )
    assert str(err.value).startswith("plan: cannot write s3://bkt/control/m10/plan.json: PermissionError: AccessDenied")
    with pytest.raises(QuotaExceededError, match="needs 8 vCPUs at once, the quota allows 4"):
        launch(
            request(max_concurrency=2),
            "m11",
            settings,
            fleet=None,
            executions=executions,
            committed=None,
            leases=leases,
            quotas=ServiceQuotas(Quotas(4)),
        )
    assert executions.started == [] and leases.taken == []


def test_a_resumed_matrix_looks_its_cells_lanes_up_once_and_skips_those_committed():
    """build_plan asks the store about every name a lane may commit under (the pinned boxes' and each cell's
    ``<lane>@<cell>``), without planning the matrix twice; a cell lane committed already is skipped."""
    from control_plane.launch import build_plan
    from control_plane.plan import result_lanes
    from control_plane.settings import ControlPlaneSettings

    req = request()
    asked: list[list[str]] = []

    def committed(run_id, lanes):
        asked.append(list(lanes))
        return {"serve_sweep@c01"}

    settings = ControlPlaneSettings(results_uri="s3://bkt/results", fleet_subnets="subnet-a,subnet-b")
    plan = build_plan(req, "m12", settings, None, committed)
    assert asked == [result_lanes(req)]
    cells = [f"c0{i}" for i in range(1, 7)]  # 3 types x 2 configs
    assert {f"{lane}@{c}" for lane in ("provenance", "preflight", "serve_sweep") for c in cells} <= set(asked[0])
    planned = {st.result_lane for w in plan.waves for s in w.segments for st in s.lanes}
    assert "serve_sweep@c01" not in planned and "serve_sweep@c02" in planned and "preflight@c01" in planned
    assert [(s.lane, s.reason) for s in plan.skipped] == [
        ("serve_sweep@c01", "already committed for run m12 (force to re-run)")
    ]


def test_a_launched_boxs_sync_waits_for_its_first_boot_and_is_paid_for():
    """The sync of an ephemeral box first waits for its first boot (up to FIRST_BOOT_WAIT_S), so the state machine
    waits that plus the sync's own time for its callback, the SSM command runs as long, and the segment's worst-case
    hours include the wait; a pinned box's sync keeps SYNC_TIMEOUT_S."""
    from control_plane.box_scripts import FIRST_BOOT_WAIT_S
    from statemachine.build import SYNC_TIMEOUT_S

    plan = plan_run(request(), run_id="m-sync", results_uri="s3://bkt/results", fleet=FLEET)
    for seg in plan.segments:
        assert seg.launch is not None
        assert seg.sync.timeout_s == SYNC_TIMEOUT_S + FIRST_BOOT_WAIT_S > FIRST_BOOT_WAIT_S
        assert seg.sync.execution_timeout == [str(SYNC_TIMEOUT_S + FIRST_BOOT_WAIT_S)]
        lanes_s = sum(st.timeout_s for st in seg.lanes)
        assert seg.max_instance_hours * 3600 >= lanes_s + SYNC_TIMEOUT_S + FIRST_BOOT_WAIT_S
    pinned = plan_run(RunRequest(preset="smoke"), run_id="p-sync", results_uri="s3://bkt/results")
    assert {seg.sync.timeout_s for seg in pinned.segments} == {SYNC_TIMEOUT_S}
