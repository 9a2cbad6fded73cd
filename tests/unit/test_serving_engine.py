"""The CPU engine's scheduling and stopping rules with a stand-in model (no weights): min_tokens masks EOS,
ignore_eos never stops at EOS, max_num_seqs bounds the running set and the rest wait."""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from agents.serving.cpu_engine import CpuEngine, GenerationRequest, TokenEvent  # noqa: E402 - after the importorskip of torch
from agents.serving.cpu_server import IncrementalText  # noqa: E402 - after the importorskip of torch

EOS, VOCAB = 2, 8


class EosLovingModel:
    """Always prefers EOS, then token 5; records how many sequences it saw per call."""

    def __init__(self, gate: threading.Event | None = None):
        self.gate = gate

    def forward(self, input_ids=None, cache=None, use_cache=True, logits_to_keep=1):
        if self.gate is not None:
            self.gate.wait(5)
        logits = torch.full((1, 1, VOCAB), -10.0)
        logits[0, -1, EOS] = 5.0
        logits[0, -1, 5] = 4.0
        return SimpleNamespace(logits=logits, cache=(cache or 0) + 1)

    __call__ = forward


def _generate(engine: CpuEngine, **kw) -> list[TokenEvent]:
    q: queue.Queue = queue.Queue()
    engine.submit(GenerationRequest(prompt_ids=[1, 3], emit=q.put, **kw))
    out = []
    while (ev := q.get(timeout=10)) is not None:
        assert not isinstance(ev, BaseException), ev
        out.append(ev)
    return out


@pytest.fixture
def engine():
    e = CpuEngine(EosLovingModel(), {EOS}, max_num_seqs=2, max_model_len=64).start()
    yield e
    e.shutdown()


def test_greedy_stops_at_eos(engine):
    events = _generate(engine, max_tokens=10, temperature=0.0)
    assert [e.token_id for e in events] == [EOS] and events[-1].finish_reason == "stop"


def test_min_tokens_masks_eos_until_reached(engine):
    events = _generate(engine, max_tokens=10, min_tokens=3, temperature=0.0, top_logprobs=2)
    assert [e.token_id for e in events] == [5, 5, 5, EOS] and events[-1].finish_reason == "stop"
    assert all(e.logprob <= 0 for e in events) and len(events[0].top) == 2


def test_ignore_eos_runs_to_max_tokens(engine):
    events = _generate(engine, max_tokens=4, ignore_eos=True, temperature=0.0)
    assert [e.token_id for e in events] == [EOS] * 4 and events[-1].finish_reason == "length"
    assert [e.finish_reason for e in events[:-1]] == [None] * 3


def test_seeded_sampling_is_reproducible(engine):
    a = _generate(engine, max_tokens=6, ignore_eos=True, temperature=1.5, seed=7)
    b = _generate(engine, max_tokens=6, ignore_eos=True, temperature=1.5, seed=7)
    assert [e.token_id for e in a] == [e.token_id for e in b]


def test_requests_beyond_max_num_seqs_wait():
    gate = threading.Event()
    engine = CpuEngine(EosLovingModel(gate), {EOS}, max_num_seqs=1, max_model_len=64).start()
    try:
        qs = []
        for _ in range(3):
            q: queue.Queue = queue.Queue()
            engine.submit(GenerationRequest(prompt_ids=[1], emit=q.put, max_tokens=2, ignore_eos=True))
            qs.append(q)
        pause = threading.Event()
        for _ in range(500):  # the engine thread admits asynchronously; a loaded box may take a while
            s = engine.stats()
            if s.running == 1 and s.waiting == 2:
                break
            pause.wait(0.02)
        s = engine.stats()
        assert (s.running, s.waiting, s.kv_capacity_tokens) == (1, 2, 64)
        gate.set()
        for q in qs:
            while q.get(timeout=10) is not None:
                pass
        for _ in range(500):  # the scheduler retires a sequence just after emitting its end
            if engine.stats().requests_finished_total == 3:
                break
            pause.wait(0.02)
        assert engine.stats().requests_finished_total == 3 and engine.stats().running == 0
    finally:
        gate.set()
        engine.shutdown()


class _ByteTok:
    """Decodes ids as bytes; an incomplete UTF-8 sequence decodes to U+FFFD like a byte-level BPE."""

    def decode(self, ids, skip_special_tokens=True):
        return bytes(ids).decode("utf-8", errors="replace")


def test_incremental_text_holds_back_partial_characters():
    text = IncrementalText(_ByteTok())
    euro = "€".encode()
    assert text.push(ord("a"), False) == "a"
    assert text.push(euro[0], False) == ""
    assert text.push(euro[1], False) == ""
    assert text.push(euro[2], True) == "€"
    assert text.sent == "a€"


def test_an_injected_slowdown_waits_its_fraction_of_every_forward_pass(monkeypatch):
    import agents.serving.cpu_engine as engine_mod

    ticks = iter(range(0, 10_000, 2))  # a fake clock: every forward pass "takes" 2 s
    waits: list[float] = []
    monkeypatch.setattr(engine_mod.time, "perf_counter", lambda: float(next(ticks)))
    monkeypatch.setattr(engine_mod.time, "sleep", waits.append)
    e = CpuEngine(EosLovingModel(), {EOS}, max_num_seqs=1, max_model_len=64, slowdown=0.1).start()
    try:
        events = _generate(e, max_tokens=3, ignore_eos=True, temperature=0.0)
    finally:
        e.shutdown()
    assert len(events) == 3 and waits == [pytest.approx(0.2)] * 3  # one wait per token: 10 % of its 2 s pass
