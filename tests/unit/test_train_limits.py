"""The training side of the limits (issue 26 item 4): the ``train_seq_len`` search on fixed probe outcomes, its
plan-time checks one line each, the probe's failure classifier on verbatim lines, the report's bracket view and
Limits section on fixed rows, and the plan's probe budget line."""

from __future__ import annotations

import io

import pytest

from pipeline.limits import TRAINING_KINDS, Ceiling, LimitSearch, LimitSearchError, check_searches
from tests.unit.test_limits import _view, run

# the predecessor's compiler error at sequence 8,192 (trn1/results/extras/ctx_8192.log, line 149), verbatim
EOOM = (
    "[ERROR] [NCC_EOOM002] Maximum peak HBM usage of 18.12GB exceeds HBM limit of 16.00GB for Trn1. This consists "
    "of 1.27MB model constants, 7.69GB I/O tensors, 8.88GB internal (scratchpad) tensors, 6.62MB DMA ring I/O, "
    "and 1.02GB DMA ring spills - Check the target architecture flag to ensure you are compiling for correct "
    "target, or consider using smaller batches or applying model/tensor parallelism."
)
# the CPU allocator's refusal under the probe's address-space cap (a tiny-llama probe at 2,048 tokens), verbatim
CPU_OOM = (
    "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
    "you tried to allocate 16769024 bytes. Error code 12 (Cannot allocate memory)"
)


def test_the_training_search_bisects_to_its_precision_in_its_own_words():
    b = run(LimitSearch("train_seq_len", 2048, 16384, at=1, precision=1024, max_boots=6), 6000)
    assert [p.value for p in b.probes] == [2048, 16384, 9216, 5120, 7168, 6144]
    assert (b.low, b.high, b.stop_reason) == (5120, 6144, "bracket within the precision 1024")
    short = run(LimitSearch("train_seq_len", 2048, 16384, at=1, precision=1024, max_boots=4), 6000)
    assert (short.low, short.high, short.stop_reason) == (5120, 9216, "probe budget spent (4 probes)")
    assert (
        run(LimitSearch("train_seq_len", 2048, 16384), 6000, fail_good=True).stop_reason
        == "the known-good bound 2048 did not train: no bracket"
    )
    assert (
        run(LimitSearch("train_seq_len", 2048, 16384), None).stop_reason
        == "the known-bad bound 16384 trained: the limit is above it"
    )


@pytest.mark.parametrize(
    "search, ceiling, message",
    [
        (
            {"kind": "max_num_seqs", "good": 1, "bad": 8},
            None,
            "searches[0].kind: one of train_seq_len, got 'max_num_seqs'",
        ),
        (
            {"kind": "train_seq_len", "good": 256, "bad": 4096},
            Ceiling(2048, "tiny-llama's max_position_embeddings"),
            "searches[0].bad: at most 2048 (tiny-llama's max_position_embeddings), got 4096",
        ),
        ({"kind": "train_seq_len", "good": 256, "bad": 2048, "at": 0}, None, "searches[0].at: an integer >= 1, got 0"),
        (
            {"kind": "train_seq_len", "good": 256, "bad": 2048, "max_boots": 33},
            None,
            "searches[0].max_boots: at most 32 probes",
        ),
    ],
)
def test_each_bad_training_search_is_one_line(search, ceiling, message):
    with pytest.raises(LimitSearchError) as err:
        check_searches([search], 6, TRAINING_KINDS, ceiling)
    assert str(err.value).startswith(message)


def test_the_plan_refuses_a_training_search_beyond_the_models_positions_naming_the_lane():
    from control_plane.lane_configs import LaneConfigInvalidError
    from control_plane.models import parse_request
    from control_plane.plan import plan_run
    from pipeline.model_catalogue import get_model

    positions = get_model("llama-3.1-8b-instruct").facts.max_positions
    req = parse_request(
        {
            "lanes": ["train_limits"],
            "profile": "full",
            "lane_config": {
                "train_limits": {"searches": [{"kind": "train_seq_len", "good": 2048, "bad": positions + 1}]}
            },
        }
    )
    with pytest.raises(
        LaneConfigInvalidError,
        match=rf"^train_limits: (Config: )?searches\[0\]\.bad: at most "
        rf"{positions} \(llama-3.1-8b-instruct's max_position",
    ):
        plan_run(req, run_id="r1", results_uri="s3://b/results")


PREDECESSOR_SEARCH = {
    "searches": [{"kind": "train_seq_len", "good": 2048, "bad": 16384, "at": 1, "precision": 1024, "max_boots": 6}]
}  # the predecessor: 4,096 trained, 8,192 did not


def test_the_tiny_profile_declares_a_search_and_the_full_one_waits_for_a_request():
    from pipeline.lane_configs.train_limits import Config

    tiny, full = Config.for_profile("tiny"), Config.for_profile("full")
    assert [s["kind"] for s in tiny.searches] == ["train_seq_len"] and full.searches == []  # a box: hours of compiles
    assert tiny.searches[0]["bad"] == 2048 and tiny.memory_cap_mib  # the tiny llama's 2,048 positions
    (s,) = check_searches(
        PREDECESSOR_SEARCH["searches"],
        full.max_boots,
        TRAINING_KINDS,
    )
    assert (s.good, s.bad, s.at) == (2048, 16384, 1)


def test_the_compiler_code_line_wins_and_out_of_memory_is_oom():
    from agents.training.probe import classify_probe_log

    log = [
        "[INFO]: Got a cached failed neff. With eror log: [Failed compilation with ['neuronx-cc', 'compile']:",
        EOOM,
        f"[rank0]: ValueError: RunNeuronCCImpl: error condition error != 0: {EOOM}",
    ]
    assert classify_probe_log(log, 1) == ("compile_error", EOOM)
    assert classify_probe_log(["Traceback (most recent call last):", '  File "x.py", line 1', "MemoryError"], 1) == (
        "oom",
        "MemoryError",
    )
    assert classify_probe_log(
        [
            "Traceback (most recent call last):",
            CPU_OOM,
            "agents.training.backends.TrainingError: training tiny-llama failed: " + CPU_OOM,
        ],
        1,
    ) == ("oom", CPU_OOM)


def _training_rows() -> list[dict]:
    search = {
        "run_id": "r1",
        "lane": "train_limits",
        "search_id": "t1",
        "model": "llama",
        "kind": "train_seq_len",
        "at_field": "batch_size",
        "at_value": 1,
        "backend": "neuron",
    }
    src = "neuron-monitor: the highest device_mem_used_mib"
    return [
        {
            **search,
            "probe": 1,
            "phase": "bisect",
            "value": 4096,
            "succeeded": True,
            "wall_s": 1622.6,
            "peak_mem_bytes": 28959 * 2**20,
            "peak_mem_source": src,
            "tokens_per_s": 3574.1,
        },
        {
            **search,
            "probe": 2,
            "phase": "bisect",
            "value": 8192,
            "succeeded": False,
            "error_kind": "compile_error",
            "error": EOOM,
            "peak_mem_bytes": None,
        },
        {**search, "phase": "outcome", "stop_reason": "probed by hand"},
    ]


def test_the_view_gives_a_training_bracket_its_peak_memory_and_tokens_at_low():
    (r,) = (
        _view(_training_rows())
        .execute(
            "SELECT bracket, error_kind_at_high, error_at_high, probes, peak_mem_at_low_bytes, peak_mem_source, "
            "tokens_per_s_at_low, at_field, at_value FROM report_limits"
        )
        .fetchall()
    )
    assert r == (
        "(4096, 8192]",
        "compile_error",
        EOOM,
        "4096 ok 28959 MiB, 8192 compile_error",
        28959 * 2**20,
        "neuron-monitor: the highest device_mem_used_mib",
        3574.1,
        "batch_size",
        1,
    )


def test_the_limits_section_shows_the_training_cliff_beside_a_serving_one():
    from analytics.report.variants_md import s_limits
    from tests.support.comparison import document

    training = _view(_training_rows()).execute("SELECT * FROM report_limits").df().to_dict("records")
    serving = {
        "run_id": "r1",
        "model": "llama",
        "kind": "max_model_len",
        "at_field": "max_num_seqs",
        "at_value": 8,
        "bracket": "(3072, 4096]",
        "error_kind_at_high": "compile_error",
        "error_at_high": "[NCC_INLA001] x",
        "boots": 4,
        "probes": "3072 ok, 4096 compile_error",
        "stop_reason": "by hand",
    }
    text = "\n".join(s_limits(document(variants={"limits": [serving, *training]})))
    assert "| train_seq_len at batch_size=1 | (4096, 8192] | compile_error: " + EOOM + " |" in text
    assert "| 4096 ok 28959 MiB, 8192 compile_error | 28,959 MiB |" in text
    assert "| max_model_len at max_num_seqs=8 | (3072, 4096] | compile_error: [NCC_INLA001] x |" in text
    assert "Peak memory measured by neuron-monitor: the highest device_mem_used_mib;" in text


def test_the_plan_states_the_training_probe_budget_and_where_its_cost_comes_from():
    from rich.console import Console

    from control_plane.commands.plan import print_server_configs
    from control_plane.lane_configs import built_config
    from control_plane.models import parse_request
    from control_plane.timetable import TRAIN_PROBE_COSTS_S, limits_boots
    from pipeline.lanes import get_lane

    built = built_config(get_lane("train_limits"), "full", PREDECESSOR_SEARCH, "searches")
    (row,) = limits_boots("train_limits", built, "full", "neuron")
    each, source = TRAIN_PROBE_COSTS_S["full"]
    assert (row.unit, row.boots, row.cold, row.expected_s) == ("training probe", 6, 6, 6 * each)
    assert "trn1/results/compile/llama31_train.json" in source
    out = io.StringIO()
    print_server_configs(
        parse_request(
            {"lanes": ["train_limits"], "profile": "full", "lane_config": {"train_limits": PREDECESSOR_SEARCH}}
        ),
        ["train_limits"],
        "neuron",
        Console(file=out, width=400),
    )
    assert out.getvalue().startswith(
        "train_limits probe budget: llama-3.1-8b-instruct train_seq_len in (2048, 16384] at batch_size=1: at most 6 "
        "training probes, 6 training-graph compiles, expected 2:30:00 (anchor: "
    )


class _Sensor:
    name = "neuron_monitor"

    def __init__(self, values: list[float | None]):
        self.values = values

    def sample(self) -> list[dict]:
        return [
            {
                "source": self.name,
                "metric": "device_mem_used_mib",
                "device": "nd0",
                "value": self.values.pop(0),
                "unit": "MiB",
                "note": None,
            }
        ]

    def close(self) -> None:
        pass


def test_a_neuron_probes_peak_memory_is_the_highest_sample_in_its_window_or_null():
    import time
    from types import SimpleNamespace

    from agents.lanes.train_limits import DEVICE_MEM_SOURCE, _peak_memory
    from agents.telemetry import TelemetrySampler

    sampler = TelemetrySampler([_Sensor([100.0, 1500.0, 900.0, None])])
    sampler.sample_once()  # before the probe: not in its window
    t0 = time.perf_counter_ns()
    sampler.sample_once()
    sampler.sample_once()
    t1 = time.perf_counter_ns()
    sampler.sample_once()  # a NULL sample after it
    ctx = SimpleNamespace(backend="neuron", telemetry=sampler)
    assert _peak_memory(ctx, 123, t0, t1) == (1500 * 2**20, DEVICE_MEM_SOURCE)  # the device's, not the host RSS
    assert _peak_memory(ctx, 123, t1, time.perf_counter_ns()) == (None, None)  # the sensor said nothing
    assert _peak_memory(SimpleNamespace(backend="neuron", telemetry=None), 123, t0, t1) == (None, None)
    assert _peak_memory(SimpleNamespace(backend="cpu", telemetry=None), 123, t0, t1)[0] == 123
