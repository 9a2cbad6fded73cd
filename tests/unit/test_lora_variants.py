"""Multi-LoRA variants as data (issue 26, item 6): the ``lora`` field's checks (one line per refusal), its
fingerprint, the server flags, the plan's lane checks, the exact traffic split and the report's traffic view."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import duckdb
import pytest

from pipeline.servers import NEURON_BOX, ServerVariantError, ServingTarget, backend_problems, resolve_server_configs

SFT2 = {"adapters": {"ft": {"source": "sft", "weight": 3}, "ft-b": "sft"}}


def _one(spec: dict, backend: str = "cpu", profile: str = "tiny", check: bool = True):
    (cfg,) = resolve_server_configs({"v": spec}, profile, backend, check=check)
    return cfg


@pytest.mark.parametrize(
    "lora, line",
    [
        ("sft", "server_configs.v.lora: an object {adapters, base_weight, max_lora_rank, max_loras}, got str"),
        (
            {"adapters": {"a": "sft"}, "rank": 8},
            "server_configs.v.lora.rank: unknown field; lora takes adapters, base_weight, max_lora_rank, max_loras",
        ),
        ({"adapters": {}}, "server_configs.v.lora.adapters: a non-empty object"),
        ({"adapters": ["sft"]}, "server_configs.v.lora.adapters: a non-empty object"),
        ({"adapters": {"9x": "sft"}}, "server_configs.v.lora.adapters.9x: an adapter name is a letter"),
        (
            {"adapters": {"a": {"source": "sft", "share": 1}}},
            "server_configs.v.lora.adapters.a.share: unknown field; an adapter takes source, weight",
        ),
        ({"adapters": {"a": ""}}, "server_configs.v.lora.adapters.a: 'sft' (this run's fine-tune"),
        ({"adapters": {"a": {"weight": 1}}}, "server_configs.v.lora.adapters.a.source: 'sft'"),
        ({"adapters": {"a": "s3://bucket"}}, "server_configs.v.lora.adapters.a: an s3:// URI names a bucket and a key"),
        ({"adapters": {"a": {"source": "sft", "weight": 0}}}, "server_configs.v.lora.adapters.a.weight: a number > 0"),
        ({"adapters": {"a": {"source": "sft", "weight": -1}}}, "server_configs.v.lora.adapters.a.weight: a number > 0"),
        ({"adapters": {"a": {"source": "sft", "weight": True}}}, "server_configs.v.lora.adapters.a.weight: a number"),
        ({"adapters": {"a": {"source": "sft", "weight": float("nan")}}}, "server_configs.v.lora.adapters.a.weight:"),
        ({"adapters": {"a": "sft"}, "base_weight": -0.5}, "server_configs.v.lora.base_weight: a number >= 0"),
        ({"adapters": {"a": "sft"}, "max_lora_rank": 12}, "server_configs.v.lora.max_lora_rank: one of 1, 8, 16, 32"),
        ({"adapters": {"a": "sft"}, "max_loras": 0}, "server_configs.v.lora.max_loras: an integer in [1, 64], got 0"),
    ],
)
def test_each_bad_lora_field_is_one_line_naming_it(lora, line):
    with pytest.raises(ServerVariantError) as err:
        _one({"lora": lora})
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_a_lora_variant_sets_its_adapters_and_traffic():
    cfg = _one({"lora": SFT2})
    assert cfg.base == "A" and cfg.description == "A with lora=ft:3+ft-b:1"
    assert [(a.name, a.source, a.weight) for a in cfg.lora.adapters] == [("ft", "sft", 3.0), ("ft-b", "sft", 1.0)]
    assert cfg.lora.slots == 2 and cfg.lora.max_lora_rank == 16
    assert cfg.model_mix("tiny-llama") == (("ft", 3.0), ("ft-b", 1.0))
    with_base = _one({"lora": {**SFT2, "base_weight": 2}})
    assert with_base.model_mix("tiny-llama")[-1] == ("tiny-llama", 2.0)
    assert _one({"base": "A"}).model_mix("tiny-llama") is None
    assert json.loads(cfg.to_json())["lora"] == {
        "adapters": {"ft": {"source": "sft", "weight": 3.0}, "ft-b": {"source": "sft", "weight": 1.0}},
        "base_weight": 0.0,
        "max_lora_rank": 16,
        "max_loras": 2,
    }


def test_the_fingerprint_holds_the_adapter_set_not_where_its_files_lie():
    base, cfg = _one({"base": "A"}), _one({"lora": SFT2})
    assert cfg.fingerprint() != base.fingerprint()
    on_disk = dataclasses.replace(
        cfg,
        lora=dataclasses.replace(
            cfg.lora, adapters=tuple(dataclasses.replace(a, path=f"/box/{a.name}") for a in cfg.lora.adapters)
        ),
    )
    assert on_disk.fingerprint() == cfg.fingerprint()  # the lane sets paths; the graphs do not change
    other = _one({"lora": {"adapters": {"ft": {"source": "sft", "weight": 1}, "ft-b": "sft"}}})
    assert other.fingerprint() != cfg.fingerprint()  # another split is never an A/A copy
    assert _one({"lora": {**SFT2, "max_lora_rank": 32}}).fingerprint() != cfg.fingerprint()


def test_neuron_needs_a_slot_per_adapter_and_every_backend_serves_lora():
    cfg = _one({"lora": {**SFT2, "max_loras": 1}}, "neuron", "full", check=False)
    assert backend_problems(cfg, "neuron") == [
        "server_configs.v.lora.max_loras: vLLM Neuron loads every adapter into a slot at boot: 2 adapters need "
        "max_loras >= 2, got 1"
    ]
    one = dataclasses.replace(cfg, tensor_parallel=1)
    for backend, server in (("cuda", None), ("cpu", "vllm-cpu"), ("cpu", "neuronpipe")):
        assert backend_problems(one, backend, server=server) == []


def test_an_adapter_named_like_the_served_model_is_refused():
    spec = {"v": {"lora": {"adapters": {"tiny-llama": "sft"}}}}
    assert ServingTarget("cpu", server="neuronpipe").problems(spec, "tiny", ["tiny-llama"]) == [
        "server_configs.v.lora.adapters.tiny-llama: the served model's own name; an adapter needs a name of its own "
        "(requests ask for it as their model)"
    ]


def test_the_lora_flags_are_vllms_and_the_cpu_servers(tmp_path):
    from agents.serving.cpu import CpuLauncher
    from agents.serving.launcher import ServedModel
    from agents.serving.vllm_args import AdapterFilesMissingError, lora_args, vllm_command

    cfg = _one({"lora": {**SFT2, "max_lora_rank": 32}})
    with pytest.raises(AdapterFilesMissingError, match=r"server_configs.v.lora.adapters.ft: its files are not"):
        lora_args(cfg)
    cfg = dataclasses.replace(
        cfg,
        lora=dataclasses.replace(
            cfg.lora, adapters=tuple(dataclasses.replace(a, path=f"/a/{a.name}") for a in cfg.lora.adapters)
        ),
    )
    flags = ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "32", "--lora-modules", "ft=/a/ft", "ft-b=/a/ft-b"]
    assert lora_args(cfg) == flags
    model = ServedModel("tiny-llama", tmp_path)
    cmd = vllm_command("python", model, cfg, 8000)
    assert cmd[cmd.index("--enable-lora") : cmd.index("--enable-lora") + len(flags)] == flags
    cpu = CpuLauncher(vllm_cpu_python="").command(model, cfg, 8000)
    assert cpu[cpu.index("--enable-lora") : cpu.index("--enable-lora") + len(flags)] == flags
    assert lora_args(_one({"base": "A"})) == []


def test_the_cpu_server_reads_the_same_flags():
    from agents.serving import cpu_server

    with pytest.raises(SystemExit):
        cpu_server.main(["--model", "m", "--lora-modules", "a=/x"])  # without --enable-lora
    with pytest.raises(SystemExit):
        cpu_server.main(["--model", "m", "--enable-lora", "--lora-modules", "no-path"])


def _plan_lines(request: dict) -> str:
    from control_plane.lane_configs import LaneConfigInvalidError
    from control_plane.models import RunRequest
    from control_plane.request_configs import configured_lanes

    with pytest.raises(LaneConfigInvalidError) as err:
        configured_lanes(RunRequest.model_validate(request))
    return str(err.value)


def test_the_plan_refuses_an_sft_adapter_where_no_fine_tune_is_served_and_a_rank_above_the_slots():
    from control_plane.models import RunRequest
    from control_plane.request_configs import configured_lanes

    lora = {"server_configs": {"A": {}, "lora": {"lora": SFT2}}}
    text = _plan_lines({"profile": "tiny", "lanes": ["serve_sweep"], **lora})
    assert text == (
        "serve_sweep: server_configs.lora.lora.adapters.ft: source sft is the served model's fine-tune "
        "adapter, which only finetune_serve serves; give serve_sweep an adapter's path or s3:// URI\n"
        "serve_sweep: server_configs.lora.lora.adapters.ft-b: source sft is the served model's fine-tune "
        "adapter, which only finetune_serve serves; give serve_sweep an adapter's path or s3:// URI"
    )
    text = _plan_lines(
        {"profile": "tiny", "lanes": ["sft", "merge", "finetune_serve"], **lora, "lane_config": {"sft": {"lora_r": 32}}}
    )
    assert text.splitlines()[0] == (
        "finetune_serve: server_configs.lora.lora.adapters.ft: the sft lane trains rank "
        "32, above max_lora_rank 16 (raise max_lora_rank to 32)"
    )
    lanes, configs = configured_lanes(
        RunRequest.model_validate({"profile": "tiny", "lanes": ["sft", "merge", "finetune_serve"], **lora})
    )
    assert "finetune_serve" in configs


def test_the_tiny_fine_tune_lane_measures_merge_against_serving_the_adapter():
    from pipeline.config import build_config
    from pipeline.lane_configs.finetune_serve import Config

    built = build_config(Config, "tiny", {})
    configs = {c.name: c for c in resolve_server_configs(built.server_configs, "tiny", "cpu")}
    assert set(configs) == {"A", "A-copy", "lora"} and configs["lora"].base == "A"
    assert [a.source for a in configs["lora"].lora.adapters] == ["sft", "sft"]
    assert built.sweep_repeats == 1  # the repeated turn is serve_sweep's


def test_the_split_is_exact_per_phase_and_seeded():
    from agents.loadgen.point import ModelMixError, apportion, request_models

    assert apportion((("a", 3), ("b", 1)), 10) == {"a": 8, "b": 2}  # 7.5 / 2.5: the tie to the earlier name
    assert apportion((("a", 1), ("b", 1), ("c", 1)), 2) == {"a": 1, "b": 1, "c": 0}
    names = request_models((("a", 3), ("b", 1)), 4, 40, seed=7)
    assert Counter(names[:4]) == {"a": 3, "b": 1} and Counter(names[4:]) == {"a": 30, "b": 10}
    assert (
        names
        == request_models((("a", 3), ("b", 1)), 4, 40, seed=7)
        != request_models((("a", 3), ("b", 1)), 4, 40, seed=8)
    )
    assert names[4:] != sorted(names[4:])  # shuffled: no adapter's requests bunched together
    for mix, match in (
        ((), "at least one"),
        ((("a", 1), ("a", 2)), "a name given twice"),
        ((("a", 0),), "a's weight must be a number > 0"),
    ):
        with pytest.raises(ModelMixError, match=match):
            apportion(mix, 4)


def test_the_traffic_view_gives_each_name_its_share_against_the_stated_one():
    from analytics.views import derived_sql_files

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE request_metrics (run_id VARCHAR, lane VARCHAR, point_id VARCHAR, request_model VARCHAR,"
        " success BOOLEAN, ttft_ms DOUBLE, tpot_ms DOUBLE)"
    )
    con.execute(
        "CREATE TABLE sweep_points (run_id VARCHAR, lane VARCHAR, point_id VARCHAR, model VARCHAR, "
        "server_config VARCHAR, model_mix_json VARCHAR)"
    )
    con.execute(
        "INSERT INTO sweep_points VALUES ('r', 'finetune_serve', 'p1', 'm', 'lora', ?), "
        "('r', 'finetune_serve', 'p2', 'm', 'A', NULL)",
        [json.dumps({"ft": 3, "ft-b": 1})],
    )
    for i, name in enumerate(["ft"] * 6 + ["ft-b"] * 2):
        con.execute(
            "INSERT INTO request_metrics VALUES ('r', 'finetune_serve', 'p1', ?, ?, ?, 2.0)", [name, i != 0, 10.0 + i]
        )
    con.execute("INSERT INTO request_metrics VALUES ('r', 'finetune_serve', 'p2', 'm', true, 1.0, 1.0)")
    (sql,) = [text for name, text in derived_sql_files() if name == "38_report_lora.sql"]
    con.execute(sql)
    got = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT request_model, requests, share, stated_share, succeeded, p50_ttft_ms FROM report_lora_traffic "
            "ORDER BY 1"
        ).fetchall()
    }
    assert got == {"ft": (6, 0.75, 0.75, 5, 13.0), "ft-b": (2, 0.25, 0.25, 2, 16.5)}


def test_the_variants_section_prints_the_traffic_table():
    from analytics.report.variants_md import s_variants
    from tests.support.comparison import document

    c = {
        "variants": {
            "configs": [
                {
                    "run_id": "r",
                    "lane": "finetune_serve",
                    "model": "m",
                    "config": "lora",
                    "base": "A",
                    "sets": {"lora": SFT2},
                }
            ],
            "comparisons": [],
            "lora_traffic": [
                {
                    "run_id": "r",
                    "lane": "finetune_serve",
                    "model": "m",
                    "config": "lora",
                    "request_model": "ft",
                    "requests": 6,
                    "share": 0.75,
                    "stated_share": 0.75,
                    "succeeded": 6,
                    "p50_ttft_ms": 12.5,
                    "p50_tpot_ms": 2.25,
                }
            ],
        }
    }
    text = "\n".join(s_variants(document(c)))
    assert "| r | finetune_serve | m | lora | ft | 6 | 75.0 | 75.0 | 6 | 12.50 | 2.25 |" in text
    assert "Multi-LoRA variants serve the base model with adapters loaded unmerged" in text


def test_the_box_checks_a_lora_variant_like_any_other():
    assert NEURON_BOX.problems({"v": {"lora": SFT2}}, "full", ["llama-3.1-8b-instruct"]) == []
