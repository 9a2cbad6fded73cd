"""Server variants declared in a serving lane's config: ``server_configs`` as a map {NAME: {...}} on top of the
catalogue, checked at plan time (one line naming the entry and field), resolved into the ServerConfigs a lane
boots (fields applied, extra_args passed to the CPU server verbatim and in the fingerprint), a variant without
shapes of its own sweeping its base's, and the balanced repeat order."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.serving.cpu import CpuLauncher
from agents.serving.launcher import ServedModel
from agents.serving.sweep import repeat_schedule
from pipeline.config import LaneConfigError, build_config
from pipeline.lane_configs.capacity import Config as CapacityConfig
from pipeline.lane_configs.serve_sweep import Config as SweepConfig
from pipeline.servers import ServerVariantError, catalogue, check_server_configs, resolve_server_configs

VARIANTS = {
    "A": {},
    "A2": {"base": "A"},
    "S": {"base": "A", "extra_args": ["--slowdown", "0.1"]},
    "long": {"base": "B", "max_num_seqs": 1, "description": "one long sequence"},
}


def test_a_list_of_names_is_the_catalogue():
    cat = catalogue("tiny", "cpu")
    assert resolve_server_configs(["B", "A"], "tiny", "cpu") == [cat["B"], cat["A"]]


def test_variants_resolve_on_their_base_in_order():
    a, a2, s, long = resolve_server_configs(VARIANTS, "tiny", "cpu")
    cat = catalogue("tiny", "cpu")
    assert a == cat["A"] and a.base is None
    assert (a2.name, a2.base, a2.max_num_seqs) == ("A2", "A", cat["A"].max_num_seqs)
    assert a2.fingerprint() == a.fingerprint()  # name and base change no graph
    assert s.extra_args == ("--slowdown", "0.1") and s.fingerprint() != a.fingerprint()
    assert (long.max_model_len, long.max_num_seqs, long.base) == (cat["B"].max_model_len, 1, "B")
    assert '"extra_args": ["--slowdown", "0.1"]' in s.to_json()


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"S": {"base": "A", "max_num_seq": 2}}, "server_configs.S.max_num_seq: unknown field; a variant may set"),
        ({"S": {"base": "Z"}}, "server_configs.S.base: 'Z' is not a catalogue config (A, B)"),
        ({"S": {}}, "server_configs.S: not in the catalogue (A, B) and declares no fields"),
        ({"S": {"max_num_seqs": 0}}, "server_configs.S.max_num_seqs: an integer in [1, 4096], got 0"),
        ({"S": {"max_model_len": "long"}}, "server_configs.S.max_model_len: an integer in [16, 1048576], got 'long'"),
        ({"S": {"max_num_seqs": True}}, "server_configs.S.max_num_seqs: an integer"),
        ({"S": {"extra_args": "--slowdown 0.1"}}, "server_configs.S.extra_args: a list of non-empty strings"),
        ({"S": {"extra_args": [""]}}, "server_configs.S.extra_args: a list of non-empty strings"),
        ({"S": ["A"]}, "server_configs.S: a variant is an object of fields"),
        ({"bad name": {"base": "A"}}, "server_configs.bad name: a config name is a letter"),
        ({}, "server_configs: at least one config"),
        (["A", "C"], "server_configs: unknown server config 'C'; valid configs: A, B"),
        (["A", "A"], "server_configs: a config named twice"),
        ("A", "server_configs: a list of config names or a map of variants, got str"),
    ],
)
def test_a_bad_variant_is_one_line_naming_entry_and_field(spec, message):
    with pytest.raises(ServerVariantError) as exc:
        check_server_configs(spec)
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_lane_configs_refuse_a_bad_variant_when_built():
    for cls in (SweepConfig, CapacityConfig):
        with pytest.raises(LaneConfigError, match="server_configs.S.base"):
            build_config(cls, "tiny", {"server_configs": {"S": {"base": "Z"}}})
        assert build_config(cls, "tiny", {"server_configs": VARIANTS}).server_configs == VARIANTS


def test_the_cpu_server_gets_a_variants_extra_args_verbatim(tmp_path):
    s = resolve_server_configs(VARIANTS, "tiny", "cpu")[2]
    cmd = CpuLauncher().command(ServedModel("tiny-llama", Path(tmp_path)), s, 8123)
    assert cmd[-2:] == ["--slowdown", "0.1"] and "agents.serving.cpu_server" in cmd


def test_repeat_orders():
    a, b, c = "A", "B", "C"
    assert repeat_schedule([a, b], 3, "interleaved") == [(a, 0), (b, 0), (a, 1), (b, 1), (a, 2), (b, 2)]
    assert repeat_schedule([a, b, c], 2, "balanced") == [(a, 0), (b, 0), (c, 0), (c, 1), (b, 1), (a, 1)]
    assert repeat_schedule([a, b], 3, "blocked") == [(a, None), (b, None)]
    assert repeat_schedule([a, b], 1, "balanced") == [(a, None), (b, None)]
