"""Pure parts of the load generator: grid, arrivals, adapters, prompts, synthetic config, vLLM JSON."""

from __future__ import annotations

import json

import pytest

from agents.loadgen.adapters import UnknownServerKindError, detect_server_kind, get_adapter
from agents.loadgen.arrivals import ArrivalSpecError, ClosedLoop, OpenLoop
from agents.loadgen.grid import ModelConfigError, derive_grid, kv_bytes_per_token
from agents.loadgen.prompts import PromptLengthError, UnknownPromptSourceError, WhitespaceTokenizer, build_prompts
from agents.loadgen.synthetic_server import (
    SyntheticConfig,
    SyntheticServerConfigError,
    count_prompt_tokens,
    planned_output_tokens,
)

LLAMA_31_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}


def test_kv_bytes_llama_31_8b_is_128_kib_per_token():
    n, text = kv_bytes_per_token(LLAMA_31_8B)
    assert n == 128 * 1024
    assert "32 layers × 8 kv_heads × 128 head_dim" in text


def test_grid_bound_reduced_and_reason():
    gib = 1 << 30
    g = derive_grid(LLAMA_31_8B, device_mem_bytes=32 * gib, weight_bytes=16 * gib, max_model_len=4096, max_num_seqs=64)
    # 16 GiB free / (128 KiB × 4096 = 512 MiB) = 32 sequences < 64
    assert g.bound == 32 and g.limit == 32 and g.reduced
    assert g.values == (1, 2, 4, 8, 16, 32)
    assert "KV budget" in g.reason and "floor(" in g.arithmetic
    roomy = derive_grid(LLAMA_31_8B, 32 * gib, 16 * gib, 4096, max_num_seqs=24)
    assert roomy.limit == 24 and not roomy.reduced and roomy.values[-1] == 24
    assert json.loads(roomy.to_json())["bound"] == 32
    none = derive_grid(LLAMA_31_8B, 8 * gib, 16 * gib, 4096, 8)
    assert none.values == () and none.reduced and "no sequence fits" in none.reason
    with pytest.raises(ModelConfigError, match="num_hidden_layers"):
        derive_grid({}, gib, 0, 128, 8)


def test_grid_uses_explicit_head_dim_and_text_config():
    qwen3 = {
        "text_config": {
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "head_dim": 128,
        }
    }
    assert kv_bytes_per_token(qwen3)[0] == 36 * 8 * 128 * 2 * 2


def test_gamma_schedule_is_seeded_absolute_and_has_the_mean_rate():
    a = OpenLoop(rate=20.0, burstiness=1.0, seed=3).schedule_s(4000)
    assert a[0] == 0.0 and a == sorted(a)
    assert a == OpenLoop(rate=20.0, burstiness=1.0, seed=3).schedule_s(4000)
    assert 3999 / a[-1] == pytest.approx(20.0, rel=0.05)
    bursty = OpenLoop(rate=20.0, burstiness=0.25, seed=3).schedule_s(4000)
    gaps = [b - a for a, b in zip(bursty, bursty[1:])]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean**2
    assert cv2 == pytest.approx(4.0, rel=0.25)  # gamma shape k: squared CV = 1/k
    with pytest.raises(ArrivalSpecError):
        OpenLoop(rate=0)
    with pytest.raises(ArrivalSpecError):
        ClosedLoop(0)


def test_adapters_pin_lengths_per_server_kind():
    v = get_adapter("vllm").body("completions", "m", "hi there", 8, 16)
    assert v["ignore_eos"] is True and v["min_tokens"] == 16 and v["max_tokens"] == 16
    assert v["truncate_prompt_tokens"] == 8 and v["stream"] is True
    assert v["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    t = get_adapter("transformers").body("chat", "m", "hi", 8, 16)
    assert "ignore_eos" not in t and t["messages"] == [{"role": "user", "content": "hi"}]
    assert json.loads(t["generation_config"])["min_new_tokens"] == 16
    assert get_adapter("transformers").max_concurrency == 1
    o = get_adapter("openai").body("completions", "m", "x", 8, 4)
    assert "ignore_eos" not in o and "continuous_usage_stats" not in o["stream_options"]
    with pytest.raises(UnknownServerKindError, match="valid kinds: openai, synthetic, transformers, vllm"):
        get_adapter("tgi")


def test_detect_server_kind():
    assert detect_server_kind({"data": [{"id": "x", "owned_by": "vllm"}]}) == "vllm"
    assert detect_server_kind({"data": [{"id": "x", "owned_by": "neuronpipe-synthetic"}]}) == "synthetic"
    assert detect_server_kind({"data": []}) == "openai"


@pytest.fixture(scope="module")
def bpe_with_bos(tmp_path_factory):
    """A tiny byte-level BPE whose post-processor adds a BOS token (like Llama 3)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<bos>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    text = [
        "the quick brown fox jumps over the lazy dog",
        "a load generator measures time to first token",
        "inter token latency is the gap between chunks",
        "prompts are built to an exact length",
    ] * 20
    tok.train_from_iterator(text, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    d = tmp_path_factory.mktemp("tok")
    tok.save(str(d / "tokenizer.json"))
    return d


@pytest.mark.parametrize("n", [2, 7, 64, 300])
def test_prompts_are_exactly_n_tokens_with_bos(bpe_with_bos, n):
    from agents.loadgen.prompts import HfTokenizer

    tok = HfTokenizer(bpe_with_bos)
    assert tok.encode("", True) == [0]
    prompts = build_prompts(tok, 20, n, "random", seed=1)
    assert {len(tok.encode(p.text, True)) for p in prompts} == {n}
    if n > 2:
        assert len({p.text for p in prompts}) == 20  # distinct prompts
    assert all(p.tokens == n for p in prompts)


def test_prompts_from_sharegpt_and_errors(bpe_with_bos, tmp_path):
    from agents.loadgen.prompts import HfTokenizer

    tok = HfTokenizer(bpe_with_bos)
    f = tmp_path / "sg.json"
    f.write_text(
        json.dumps(
            [{"conversations": [{"from": "human", "value": "the lazy dog jumps"}, {"from": "gpt", "value": "ok"}]}]
        )
    )
    prompts = build_prompts(tok, 3, 40, "sharegpt", sharegpt_path=f)
    assert {len(tok.encode(p.text, True)) for p in prompts} == {40}
    assert "lazy dog" in prompts[0].text
    with pytest.raises(PromptLengthError, match="no room"):
        build_prompts(tok, 1, 1)
    with pytest.raises(UnknownPromptSourceError, match="valid sources"):
        build_prompts(tok, 1, 8, "c4")


def test_whitespace_tokenizer_matches_the_synthetic_server_count():
    tok = WhitespaceTokenizer()
    p = build_prompts(tok, 2, 17)[0]
    assert count_prompt_tokens({"prompt": p.text}) == 17
    assert count_prompt_tokens({"messages": [{"role": "user", "content": p.text}]}) == 17
    assert count_prompt_tokens({"prompt": [5, 6, 7]}) == 3


def test_synthetic_config_is_deterministic_and_validated():
    cfg = SyntheticConfig(error_rate=0.2, faults={"close": 0.2, "stall": 0.1}, seed=7)
    picks = [cfg.fault_for(f"r{i}") for i in range(2000)]
    assert picks == [cfg.fault_for(f"r{i}") for i in range(2000)]
    assert picks.count("http_error") / 2000 == pytest.approx(0.2, abs=0.04)
    assert picks.count("close") / 2000 == pytest.approx(0.2, abs=0.04)
    assert SyntheticConfig().fault_for("x") is None
    jit = SyntheticConfig(ttft_ms=50, itl_ms=10, jitter_ms=2)
    offs = jit.chunk_offsets_s("a", 5)
    assert offs == jit.chunk_offsets_s("a", 5) and offs != jit.chunk_offsets_s("b", 5)
    assert SyntheticConfig(ttft_ms=50, itl_ms=10).chunk_offsets_s("a", 3) == pytest.approx([0.05, 0.06, 0.07])
    assert planned_output_tokens(SyntheticConfig(eos_at=5), {"max_tokens": 9}) == 5
    assert planned_output_tokens(SyntheticConfig(eos_at=5), {"max_tokens": 9, "ignore_eos": True}) == 9
    with pytest.raises(SyntheticServerConfigError, match="valid faults"):
        SyntheticConfig(faults={"fire": 1.0})
    with pytest.raises(SyntheticServerConfigError, match="loopback"):
        SyntheticConfig(host="0.0.0.0")


def test_chat_prompts_count_the_template(bpe_with_bos):
    from agents.loadgen.prompts import HfTokenizer

    class Templated(HfTokenizer):
        def chat_count(self, text):  # a template adding 5 tokens around the content
            return len(self.encode(text, False)) + 5

    tok = Templated(bpe_with_bos)
    prompts = build_prompts(tok, 5, 30, chat=True)
    assert {tok.chat_count(p.text) for p in prompts} == {30}
    assert {len(tok.encode(p.text, False)) for p in prompts} == {25}
