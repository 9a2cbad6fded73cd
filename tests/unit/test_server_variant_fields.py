"""Server variants as data (issue 26): every field a variant may set, validated at plan time with one line
naming entry and field; what each backend's server refuses; fingerprints (only graph-changing fields, defaults
leave old caches' names alone); the KV budget arithmetic per variant against the box; the vLLM flags each field
becomes; a run request's map of variants picked by name in a lane; the plan refusing what the box cannot boot."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from agents.serving.launcher import ServedModel
from agents.serving.vllm_args import DraftModelMissingError, vllm_command
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.local_plan import plan_local
from control_plane.models import RunRequestError, parse_request
from control_plane.plan import plan_run
from control_plane.request_configs import lane_config
from pipeline.model_catalogue import get_model
from pipeline.servers import (
    NEURON_BOX,
    ServerVariantError,
    ServingTarget,
    Speculative,
    backend_problems,
    catalogue,
    kv_dtype_bytes,
    local_target,
    pick_server_configs,
    resolve_server_configs,
)


def one(spec: dict, backend: str = "neuron", **kw):
    (cfg,) = resolve_server_configs({"V": spec}, "full", backend, **kw)
    return cfg


# ---- validation: one line per refusal -------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, message",
    [
        ({"block_size": 0}, "server_configs.V.block_size: an integer in [1, 1048576], got 0"),
        ({"tensor_parallel_size": "2"}, "server_configs.V.tensor_parallel_size: an integer in [1, 64], got '2'"),
        (
            {"kv_cache_dtype": "int4"},
            "server_configs.V.kv_cache_dtype: one of auto, fp8, fp8_e4m3, fp8_e5m2, got 'int4'",
        ),
        ({"enable_prefix_caching": "yes"}, "server_configs.V.enable_prefix_caching: true or false, got 'yes'"),
        ({"speculative": 5}, "server_configs.V.speculative: an object {draft_model, num_speculative_tokens, method}"),
        ({"speculative": {"draft": "x"}}, "server_configs.V.speculative.draft: unknown field"),
        ({"speculative": {"method": "magic"}}, "server_configs.V.speculative.method: one of draft_model, ngram"),
        (
            {"speculative": {"draft_model": "llama-1b"}},
            "server_configs.V.speculative.draft_model: 'llama-1b' is not a catalogue model; valid models:",
        ),
        (
            {"speculative": {"method": "draft_model"}},
            "server_configs.V.speculative.draft_model: method draft_model needs a draft model",
        ),
        (
            {"speculative": {"method": "ngram", "draft_model": "tinyllama-1.1b"}},
            "server_configs.V.speculative.draft_model: the ngram method proposes from the prompt",
        ),
        (
            {"speculative": {"draft_model": "tinyllama-1.1b", "num_speculative_tokens": 0}},
            "server_configs.V.speculative.num_speculative_tokens: an integer in [1, 16], got 0",
        ),
        ({"quantization": "int3"}, "server_configs.V.quantization: one of fp8, awq"),
        ({"override_neuron_config": []}, "server_configs.V.override_neuron_config: a non-empty object passed to NxDI"),
        ({"override_neuron_config": {"x": float("nan")}}, "server_configs.V.override_neuron_config: not plain JSON"),
        ({"env": ["A=1"]}, "server_configs.V.env: an object of NAME: string, got list"),
        ({"env": {"1BAD": "x"}}, "server_configs.V.env.1BAD: not an environment variable name"),
        (
            {"env": {"NEURON_COMPILE_CACHE_URL": "/tmp"}},
            "server_configs.V.env.NEURON_COMPILE_CACHE_URL: set by the launcher",
        ),
        ({"env": {"NEURON_RT_VISIBLE_CORES": 0}}, "server_configs.V.env.NEURON_RT_VISIBLE_CORES: a string, got 0"),
        (
            {"max_model_len": 1024, "block_size": 2048},
            "server_configs.V.block_size: 2048 is more than max_model_len 1024",
        ),
    ],
)
def test_each_bad_field_is_one_line_naming_it(spec, message):
    with pytest.raises(ServerVariantError) as err:
        one(spec, "cuda")
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_every_field_resolves():
    cfg = one(
        {
            "base": "B",
            "max_model_len": 4096,
            "max_num_seqs": 8,
            "block_size": 32,
            "tensor_parallel_size": 2,
            "kv_cache_dtype": "fp8",
            "enable_prefix_caching": True,
            "speculative": {"draft_model": "tinyllama-1.1b", "num_speculative_tokens": 5},
            "override_neuron_config": {"fused_qkv": True},
            "env": {"NEURON_RT_VISIBLE_CORES": "0-1"},
            "extra_args": ["--seed", "1"],
        }
    )
    assert (cfg.base, cfg.max_model_len, cfg.max_num_seqs, cfg.block_size, cfg.tensor_parallel) == ("B", 4096, 8, 32, 2)
    assert cfg.speculative == Speculative("draft_model", 5, "tinyllama-1.1b")
    assert cfg.neuron_overrides() == {"fused_qkv": True} and cfg.env_dict() == {"NEURON_RT_VISIBLE_CORES": "0-1"}
    assert cfg.description.startswith("B with max_model_len=4096, max_num_seqs=8")
    data = json.loads(cfg.to_json())
    assert (
        data["speculative"] == {"method": "draft_model", "num_speculative_tokens": 5, "draft_model": "tinyllama-1.1b"}
        and data["fingerprint"] == cfg.fingerprint()
    )


# ---- what each backend's server can do -------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, field",
    [
        ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),
        ({"enable_prefix_caching": True}, "enable_prefix_caching"),
        ({"block_size": 16}, "block_size"),
        ({"speculative": {"method": "ngram"}}, "speculative"),
        ({"quantization": "fp8"}, "quantization"),
        ({"tensor_parallel_size": 2}, "tensor_parallel_size"),
        ({"override_neuron_config": {"a": 1}}, "override_neuron_config"),
    ],
)
def test_the_neuronpipe_cpu_server_refuses_what_it_does_not_do(spec, field):
    with pytest.raises(
        ServerVariantError,
        match=rf"^server_configs\.V\.{field}: (the neuronpipe server|"
        "override_neuron_config is for the neuron)",
    ):
        resolve_server_configs({"V": spec}, "tiny", "cpu", server="neuronpipe")


@pytest.mark.parametrize("server, refused", [("neuronpipe", True), ("vllm", False), (None, False)])
def test_the_cuda_backend_refuses_by_the_server_it_boots(server, refused):
    """On cuda the neuronpipe server refuses what it does not do; vLLM for CUDA (the default) takes it."""
    spec = {"V": {"enable_prefix_caching": True}}
    if refused:
        with pytest.raises(
            ServerVariantError,
            match=r"^server_configs\.V\.enable_prefix_caching: the neuronpipe "
            r"server has no prefix cache",
        ):
            resolve_server_configs(spec, "tiny", "cuda", server=server)
    else:
        assert resolve_server_configs(spec, "tiny", "cuda", server=server)[0].enable_prefix_caching


def test_vllm_cpu_takes_prefix_caching_and_neuron_refuses_vllm_quantization():
    (cfg,) = resolve_server_configs(
        {"V": {"enable_prefix_caching": True, "kv_cache_dtype": "fp8"}}, "tiny", "cpu", server="vllm-cpu"
    )
    assert cfg.enable_prefix_caching
    assert backend_problems(dataclasses.replace(cfg, kv_cache_dtype="fp8_e4m3"), "cpu", server="vllm-cpu") == [
        "server_configs.V.kv_cache_dtype: the vllm-cpu server supports auto, fp8, fp8_e5m2, got 'fp8_e4m3'"
    ]
    with pytest.raises(
        ServerVariantError,
        match=r"^server_configs\.V\.quantization: the neuron server quantizes weights by int8_weight_only, "
        r"got 'fp8'",
    ):
        one({"quantization": "fp8"}, "neuron")
    assert backend_problems(one({"tensor_parallel_size": 4}, "cuda"), "cuda", devices=2) == [
        "server_configs.V.tensor_parallel_size: 4 is more than the box's 2 device(s)"
    ]


# ---- fingerprints ----------------------------------------------------------------------------------------
def _old_fingerprint(cfg) -> str:
    """The formula before variants had more fields: existing compile caches are named with it."""
    data = {
        "max_model_len": cfg.max_model_len,
        "max_num_seqs": cfg.max_num_seqs,
        "tensor_parallel": cfg.tensor_parallel,
        "dtype": cfg.dtype,
        "extra_args": list(cfg.extra_args),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def test_a_config_at_its_defaults_keeps_its_fingerprint():
    for profile in ("tiny", "full"):
        for backend in ("neuron", "cpu"):
            for cfg in catalogue(profile, backend).values():
                assert cfg.fingerprint() == _old_fingerprint(cfg)


@pytest.mark.parametrize(
    "change",
    [
        {"block_size": 64},
        {"kv_cache_dtype": "fp8"},
        {"enable_prefix_caching": True},
        {"quantization": "fp8"},
        {"speculative": Speculative("ngram", 3)},
        {"override_neuron_config": '{"a": 1}'},
        {"env": (("NEURON_CC_FLAGS", "-O1"),)},
        {"max_num_seqs": 3},
        {"tensor_parallel": 1},
    ],
)
def test_each_graph_field_changes_the_fingerprint(change):
    a = catalogue("full", "neuron")["A"]
    assert dataclasses.replace(a, **change).fingerprint() != a.fingerprint()


def test_placement_names_and_the_draft_path_do_not():
    a = catalogue("full", "neuron")["A"]
    pinned = dataclasses.replace(
        a, name="A-core0", base="A", description="pinned", env=(("NEURON_RT_VISIBLE_CORES", "0"),)
    )
    assert pinned.fingerprint() == a.fingerprint()
    spec = Speculative("draft_model", 4, "tinyllama-1.1b")
    assert (
        dataclasses.replace(a, speculative=spec).fingerprint()
        == dataclasses.replace(a, speculative=dataclasses.replace(spec, draft_path="/opt/x")).fingerprint()
    )


# ---- the KV budget per variant ---------------------------------------------------------------------------
def test_kv_bytes_follow_the_cache_dtype():
    facts = get_model("llama-3.1-8b-instruct").facts
    a = catalogue("full", "neuron")["A"]
    assert facts.kv_bytes_per_token(kv_dtype_bytes(a, 2)) == 131072  # docs/reference/metrics.md: 128 KiB/token in bf16
    assert facts.kv_bytes_per_token(kv_dtype_bytes(dataclasses.replace(a, kv_cache_dtype="fp8"), 2)) == 65536


def test_a_sequence_that_cannot_fit_is_refused_with_the_arithmetic():
    (tp1,) = resolve_server_configs(
        {"tp1": {"base": "B", "tensor_parallel_size": 1, "max_model_len": 32768}}, "full", "neuron"
    )
    assert NEURON_BOX.kv_problem(tp1, "qwen3-8b") == (
        "server_configs.tp1.max_model_len: qwen3-8b: one sequence of 32768 tokens needs 4.50 GiB of KV "
        "(147456 B/token), and 16 GiB of device memory (tensor parallel 1 of 2 devices) less 15.26 GiB of weights "
        "leaves 0.74 GiB"
    )
    assert NEURON_BOX.kv_problem(dataclasses.replace(tp1, tensor_parallel=2), "qwen3-8b") is None  # the whole chip
    assert NEURON_BOX.kv_problem(dataclasses.replace(tp1, max_model_len=65536, tensor_parallel=2), "qwen3-8b") == (
        "server_configs.tp1.max_model_len: qwen3-8b has 40960 positions (max_position_embeddings), got 65536"
    )
    assert NEURON_BOX.kv_problem(tp1, "tiny-llama") is None  # no facts: the box's grid arithmetic decides


# ---- the server's command line ---------------------------------------------------------------------------
def test_every_field_becomes_its_vllm_flag():
    cfg = one(
        {
            "block_size": 32,
            "kv_cache_dtype": "fp8",
            "enable_prefix_caching": True,
            "speculative": {"draft_model": "tinyllama-1.1b", "num_speculative_tokens": 5},
            "override_neuron_config": {"fused_qkv": True},
            "extra_args": ["--seed", "1"],
        }
    )
    model = ServedModel("m", "/m")
    with pytest.raises(DraftModelMissingError, match="tinyllama-1.1b's files are not on this box"):
        vllm_command("py", model, cfg, 8000)
    cfg = dataclasses.replace(cfg, speculative=dataclasses.replace(cfg.speculative, draft_path="/d"))
    cmd = vllm_command("py", model, cfg, 8000)
    flag = {cmd[i]: cmd[i + 1] for i in range(len(cmd) - 1) if cmd[i].startswith("--")}
    assert "--enable-prefix-caching" in cmd and "--no-enable-prefix-caching" not in cmd
    assert (flag["--block-size"], flag["--kv-cache-dtype"]) == ("32", "fp8")
    assert json.loads(flag["--speculative-config"]) == {
        "method": "draft_model",
        "model": "/d",
        "num_speculative_tokens": 5,
    }
    assert json.loads(flag["--override-neuron-config"]) == {"fused_qkv": True} and cmd[-2:] == ["--seed", "1"]
    plugin = vllm_command("py", model, cfg, 8000, neuron_config_flag="--additional-config")
    assert json.loads(plugin[plugin.index("--additional-config") + 1]) == {
        "override_neuron_config": {"fused_qkv": True}
    }
    plain = vllm_command("py", model, catalogue("full", "neuron")["A"], 8000)
    assert "--no-enable-prefix-caching" in plain and "--kv-cache-dtype" not in plain  # RULES: no cache hits


# ---- a run request's variants, picked by name in its lanes ----------------------------------------------
DECLARED = {"A": None, "fp8kv": {"kv_cache_dtype": "fp8"}, "seqs8": {"max_num_seqs": 8}}


def test_a_request_declares_variants_and_a_lane_picks_by_name():
    req = parse_request(
        {
            "lanes": ["serve_sweep"],
            "server_configs": DECLARED,
            "lane_config": {"serve_sweep": {"server_configs": ["A", "fp8kv", "B"]}},
        }
    )
    assert lane_config(req, "serve_sweep")["server_configs"] == {
        "A": None,
        "fp8kv": {"kv_cache_dtype": "fp8"},
        "B": None,
    }
    every = parse_request({"lanes": ["serve_sweep"], "server_configs": DECLARED})
    assert lane_config(every, "serve_sweep")["server_configs"] == DECLARED
    assert pick_server_configs(["A", "B"], ["B"]) == ["B"]


def test_a_pick_neither_declared_nor_in_the_catalogue_is_refused():
    req = parse_request(
        {
            "lanes": ["serve_sweep"],
            "profile": "tiny",
            "server_configs": DECLARED,
            "lane_config": {"serve_sweep": {"server_configs": ["A", "spec5"]}},
        }
    )
    with pytest.raises(
        LaneConfigInvalidError,
        match=r"server_configs\.spec5: not in the catalogue \(A, B\) and "
        r"declares no fields",
    ):
        plan_local(req, run_id="r1", results_uri="results")


def test_a_bad_declaration_is_refused_by_the_request():
    with pytest.raises(RunRequestError, match=r"server_configs\.fp8kv\.kv_cache_dtype: one of auto"):
        parse_request({"server_configs": {"fp8kv": {"kv_cache_dtype": "fp4"}}})


def test_the_plan_refuses_what_the_box_cannot_boot():
    req = parse_request(
        {
            "lanes": ["serve_sweep"],
            "server_configs": {
                "A": {},
                "tp4": {"tensor_parallel_size": 4},
                "tp1": {"base": "B", "tensor_parallel_size": 1, "max_model_len": 16384},
            },
        }
    )
    with pytest.raises(LaneConfigInvalidError) as err:
        plan_run(req, run_id="r1", results_uri="s3://b/results")
    assert str(err.value).splitlines() == [
        "serve_sweep: server_configs.tp4.tensor_parallel_size: 4 is more than the box's 2 device(s)",
        "serve_sweep: server_configs.tp1.max_model_len: llama-3.1-8b-instruct: one sequence of 16384 tokens needs "
        "2.00 GiB of KV (131072 B/token), and 16 GiB of device memory (tensor parallel 1 of 2 devices) less 14.96 "
        "GiB of weights leaves 1.04 GiB",
    ]
    local = parse_request(
        {
            "lanes": ["serve_sweep"],
            "profile": "tiny",
            "server_configs": {"A": {}, "pc": {"enable_prefix_caching": True}},
        }
    )
    with pytest.raises(
        LaneConfigInvalidError,
        match=r"^serve_sweep: server_configs\.pc\.enable_prefix_caching: "
        r"the neuronpipe server has no prefix cache",
    ):
        plan_local(local, run_id="r1", results_uri="results", target=ServingTarget("cpu", "neuronpipe", 1))
    assert plan_local(local, run_id="r1", results_uri="results", target=ServingTarget("cpu", "vllm-cpu", 1))


def test_a_local_target_is_known_only_on_the_cpu():
    assert local_target({}) in (None, ServingTarget("cpu", "neuronpipe", 1))  # None where this host has a device
    assert local_target({"NEURONPIPE_BACKEND": "neuron"}) is None
    assert local_target({"NEURONPIPE_BACKEND": "cpu", "NEURONPIPE_VLLM_CPU_PYTHON": "/v/bin/python"}) == ServingTarget(
        "cpu", "vllm-cpu", 1
    )


# ---- what the plan says each config's boots cost ---------------------------------------------------------
def test_the_plan_counts_each_configs_boots_and_cold_compiles():
    from control_plane.timetable import BOOT_COSTS_S, config_boots
    from pipeline.config import build_config
    from pipeline.lane_configs.serve_sweep import Config

    built = build_config(
        Config,
        "full",
        {
            "server_configs": {"A": {}, "A-copy": {"base": "A"}, "fp8kv": {"kv_cache_dtype": "fp8"}},
            "sweep_repeats": 2,
            "repeat_order": "balanced",
        },
    )
    rows = config_boots("serve_sweep", built, "full", "neuron")
    cold, warm = BOOT_COSTS_S[("full", "neuron")][:2]
    assert [(r.config, r.boots, r.cold, r.expected_s) for r in rows] == [
        ("A", 2, 1, cold + warm),
        ("A-copy", 2, 0, 2 * warm),
        ("fp8kv", 2, 1, cold + warm),
    ]  # a copy shares A's graphs
    assert "kv_cache_dtype=fp8" in rows[2].sets
    cpu = config_boots("serve_sweep", build_config(Config, "tiny", {}), "tiny", "cpu")
    assert {r.cold for r in cpu} == {0} and [r.config for r in cpu] == ["A", "A-copy", "A-int8", "B"]
    blocked = build_config(Config, "full", {"sweep_repeats": 3, "repeat_order": "blocked"})
    assert {r.boots for r in config_boots("serve_sweep", blocked, "full", "neuron")} == {1}
    cuda = config_boots("serve_sweep", built, "full", "cuda")  # no Neuron compile: none cold, a CUDA boot each
    boot = BOOT_COSTS_S[("full", "cuda")][1]
    assert [(r.cold, r.expected_s) for r in cuda] == [(0, 2 * boot)] * 3


# ---- multi-tenancy -----------------------------------------------------------------------------------------
def test_tenants_are_placement_on_disjoint_device_sets():
    from agents.serving.sweep import tenant_configs
    from pipeline.servers import tenant_placements

    (t,) = resolve_server_configs({"T": {"tenants": 2, "tensor_parallel_size": 1}}, "full", "neuron")
    assert t.tenants == 2 and t.fingerprint() == dataclasses.replace(t, tenants=1).fingerprint()  # shared graphs
    assert tenant_placements(t, "neuron") == [{"NEURON_RT_VISIBLE_CORES": "0"}, {"NEURON_RT_VISIBLE_CORES": "1"}]
    assert tenant_placements(dataclasses.replace(t, tensor_parallel=2), "cuda") == [
        {"CUDA_VISIBLE_DEVICES": "0,1"},
        {"CUDA_VISIBLE_DEVICES": "2,3"},
    ]
    assert [p["NEURONPIPE_CPU_AFFINITY"] for p in tenant_placements(t, "cpu", cores=4)] == ["0,1", "2,3"]
    servers = tenant_configs(t, "neuron")
    assert [s.env_dict() for s in servers] == [{"NEURON_RT_VISIBLE_CORES": "0"}, {"NEURON_RT_VISIBLE_CORES": "1"}]
    assert {s.name for s in servers} == {"T"} and {s.fingerprint() for s in servers} == {t.fingerprint()}
    assert "env" not in json.loads(servers[1].to_json()) and json.loads(servers[1].to_json())["tenants"] == 2


def test_tenants_that_do_not_fit_the_box_are_refused():
    req = parse_request({"lanes": ["serve_sweep"], "server_configs": {"A": {}, "T": {"tenants": 2}}})
    with pytest.raises(
        LaneConfigInvalidError,
        match=r"serve_sweep: server_configs\.T\.tenants: 2 tenants x "
        r"tensor_parallel_size 2 need 4 devices, the box has 2",
    ):
        plan_run(req, run_id="r1", results_uri="s3://b/results")
    ok = parse_request(
        {"lanes": ["serve_sweep"], "server_configs": {"A": {}, "T": {"tenants": 2, "tensor_parallel_size": 1}}}
    )
    assert plan_run(ok, run_id="r1", results_uri="s3://b/results")
    with pytest.raises(
        ServerVariantError,
        match=r"server_configs\.T\.env: a variant with tenants is placed by "
        r"the lane.*NEURON_RT_VISIBLE_CORES",
    ):
        resolve_server_configs(
            {"T": {"tenants": 2, "tensor_parallel_size": 1, "env": {"NEURON_RT_VISIBLE_CORES": "0"}}}, "full", "neuron"
        )
    with pytest.raises(ServerVariantError, match=r"server_configs\.T\.tenants: an integer in \[1, 64\]"):
        resolve_server_configs({"T": {"tenants": 0}}, "tiny", "cpu")
