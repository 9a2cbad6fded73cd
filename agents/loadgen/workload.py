"""A workload's requests, built for one point: drawn lengths, text from its source, shared prefixes, sessions,
trace and ramp schedules (the spec and its rules: :mod:`pipeline.workloads`).

Every request is still exact as the server counts it: a single-turn prompt is built to its drawn length with the
BOS rule (or through the chat template on the chat endpoint), a shared prefix is the same token ids in every
request of its group (checked after encoding the whole prompt), and a session's turn is the conversation so far
through the model's chat template, its count taken by the same template the server applies.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.loadgen.prompts import (
    BuiltPrompt,
    PromptLengthError,
    PromptTokenizer,
    _chat_text,
    _filler,
    _instruction_texts,
    exact_text,
)
from pipeline.workloads import Lengths, Workload, WorkloadError


@dataclass(frozen=True)
class RequestMeta:
    """What one request was built to be (its ``requests`` row's workload columns)."""

    input_len: int
    output_len: int
    prefix_group: int | None = None
    session_id: str | None = None
    turn_index: int | None = None
    session_turns: int | None = None


@dataclass
class SessionPlan:
    """One session: its user messages (built to their drawn lengths) and each turn's output length."""

    session_id: str
    user_texts: list[str]
    output_lens: list[int]


@dataclass
class WorkloadPlan:
    """A point's requests: single-turn prompts (by request index) or sessions, and the schedule when the workload
    has its own (a trace, a ramp)."""

    prompts: list[BuiltPrompt] = field(default_factory=list)
    metas: list[RequestMeta] = field(default_factory=list)
    sessions: list[SessionPlan] = field(default_factory=list)
    warmup_sessions: list[SessionPlan] = field(default_factory=list)
    offsets_s: list[float] | None = None  # open-loop schedule of the measured requests (trace, rate ramp)
    stream_starts_s: list[float] | None = None  # closed-loop ramp: when each stream starts
    warmup: int = 0  # single-turn: the first ``warmup`` prompts are the warm-up's
    source_sha256: str | None = None  # the dataset file read
    trace_sha256: str | None = None
    notes: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, Any]:
        """The drawn lengths' summary (the point's ``workload_json`` carries it)."""
        measured = self.metas[self.warmup :]
        out: dict[str, Any] = {}
        for side in ("input_len", "output_len"):
            xs = np.asarray([getattr(m, side) for m in measured], dtype=float)
            if len(xs):
                out[side] = {
                    "n": int(len(xs)),
                    "mean": float(xs.mean()),
                    "stdev": float(xs.std()),
                    "min": int(xs.min()),
                    "max": int(xs.max()),
                }
        if self.sessions:
            turns = np.asarray([len(s.user_texts) for s in self.sessions], dtype=float)
            out["sessions"] = {"n": int(len(turns)), "mean_turns": float(turns.mean()), "max_turns": int(turns.max())}
        return out


def draw(lengths: Lengths, n: int, rng: np.random.Generator, cap: int | None = None) -> list[int]:
    """``n`` lengths of ``lengths``: drawn (seeded by ``rng``), rounded, clipped to [lo, min(hi, cap)]; a lognormal
    spec's mean and stdev are of the lengths themselves (mu and sigma derived)."""
    hi = min(x for x in (lengths.hi, cap) if x is not None) if (lengths.hi or cap) else 1 << 20
    if lengths.dist == "exact":
        return [min(int(lengths.value), hi)] * n
    if lengths.dist == "uniform":
        x = rng.integers(lengths.low, lengths.high + 1, size=n)
    elif lengths.dist == "normal":
        x = np.rint(rng.normal(lengths.mean, lengths.stdev, size=n))
    elif lengths.dist == "lognormal":
        sigma2 = math.log1p((lengths.stdev / lengths.mean) ** 2)
        x = np.rint(rng.lognormal(math.log(lengths.mean) - sigma2 / 2, math.sqrt(sigma2), size=n))
    else:
        w = np.asarray(lengths.weights or [1.0] * len(lengths.values), dtype=float)
        x = rng.choice(np.asarray(lengths.values), size=n, p=w / w.sum())
    return np.clip(x, lengths.lo, hi).astype(int).tolist()


@functools.lru_cache(maxsize=16)
def _dataset(path: str, source: str, split: str | None) -> Any:
    """A workload's prompt file, read once per process (the lane's preflight, then every point and repeat: an
    s3:// file is not downloaded again per point)."""
    from agents.loadgen.datasets import read_dataset

    return read_dataset(path, source, split=split)


@functools.lru_cache(maxsize=16)
def _trace(
    path: str, time_scale: float, timestamp_unit: str | None, max_model_len: int | None, limit: int | None
) -> Any:
    """A workload's trace, read once per process and server length (see :func:`_dataset`)."""
    from agents.loadgen.traces import read_trace

    return read_trace(
        path, time_scale=time_scale, timestamp_unit=timestamp_unit, max_model_len=max_model_len, limit=limit
    )


def _texts(w: Workload, min_conversations: int, min_turns: int) -> tuple[list[tuple[str, ...]], str | None]:
    """The source's conversations (each: user messages in order) and the file's hash; random: none."""
    src = w.prompts
    if src.source == "random":
        return [], None
    if src.source == "instructions":
        return [(t,) for t in _instruction_texts()], None
    data = _dataset(src.path, src.source, src.split)
    data.require(min_conversations, min_turns)
    return [tuple(c) for c in data.conversations], data.sha256


class _Material:
    """Token ids to build prompts from: the source's texts in turn (cycled), or random content tokens."""

    def __init__(self, tok: PromptTokenizer, texts: list[tuple[str, ...]], rng: np.random.Generator):
        self.tok, self.texts, self.rng = tok, texts, rng
        self.filler = _filler(tok, rng)
        self._j = int(rng.integers(0, len(texts))) if texts else 0

    def ids(self, n: int, text: str | None = None) -> list[int]:
        """At least ``n`` content ids: ``text`` first when given, then the source's texts (or random tokens)."""
        out = self.tok.encode(text + "\n", False) if text else []
        while len(out) < n:
            if self.texts:
                conv = self.texts[self._j % len(self.texts)]
                self._j += 1
                out += self.tok.encode(conv[0] + "\n", False)
            else:
                out += [next(self.filler) for _ in range(n - len(out))]
        return out


def _prefix_text(tok: PromptTokenizer, more: Any, n: int, filler: Iterator[int]) -> tuple[str, list[int]]:
    """A shared prefix of exactly ``n`` tokens that ends a pre-token (a newline), so whatever follows cannot merge
    with its last token: (its text, its ids)."""
    for _ in range(16):
        for body in (n - 1, n):  # the newline is a token of its own, or (a whitespace tokenizer) none
            text = (exact_text(tok, more(body), body, filler, add_special_tokens=False) if body else "") + "\n"
            ids = tok.encode(text, False)
            if len(ids) == n:
                return text, ids
    raise PromptLengthError(f"could not build a shared prefix of exactly {n} tokens with {tok.name}")


def _prefixed(
    tok: PromptTokenizer, prefix: tuple[str, list[int]], more: Any, n: int, filler: Iterator[int], chat: bool = False
) -> str:
    """Text of exactly ``n`` tokens (the BOS rule; for ``chat`` the templated message) that starts with the
    group's shared prefix as the same token ids, whatever suffix follows (a seam that merges is retried)."""
    text0, ids0 = prefix
    special = len(tok.encode("", True))
    for _ in range(16):
        k = max(1, n - len(ids0) - (0 if chat else special))
        for _ in range(8):
            suffix = exact_text(tok, more(k), k, filler, add_special_tokens=False)
            text = text0 + suffix
            got = tok.conversation_count([{"role": "user", "content": text}]) if chat else len(tok.encode(text, True))
            if got is None or got == n:
                break
            k += n - got
            if k < 1:
                break
        if tok.encode(text, False)[: len(ids0)] == ids0 and (got is None or got == n):
            return text
    raise PromptLengthError(
        f"could not keep a {len(ids0)}-token prefix intact in a prompt of {n} tokens with {tok.name}"
    )


def plan_workload(
    w: Workload,
    tok: PromptTokenizer,
    n_warmup: int,
    n_measured: int | None,
    *,
    endpoint: str,
    max_model_len: int | None,
    seed: int = 0,
    concurrency: int | None = None,
) -> WorkloadPlan:
    """Every request of a point of ``w``: ``n_warmup`` warm-up requests (sessions: warm-up sessions of one turn)
    and ``n_measured`` measured ones (sessions: that many sessions; a trace: its requests; None with a duration:
    enough for the schedule). Lengths are clipped to ``max_model_len`` (input + output)."""
    rng = np.random.default_rng([w.seed, seed])
    chat = endpoint == "chat"
    plan = WorkloadPlan()
    trace = None
    if w.arrival.kind == "trace":
        a = w.arrival
        trace = _trace(a.path, a.time_scale, a.timestamp_unit, max_model_len, a.limit)
        plan.trace_sha256 = trace.sha256
        n_measured = len(trace.requests)
        plan.offsets_s = [r.t_s for r in trace.requests]
    n = n_measured if n_measured is not None else _scheduled_count(w)
    if w.arrival.kind == "ramp" and w.arrival.to_rate is not None:
        # a ramp with a duration sends until it ends; without one, the point's count (else until over_s)
        count = None if w.arrival.duration_s else n_measured
        a = w.arrival
        span = a.duration_s or a.over_s
        plan.offsets_s = ramp_schedule(a.from_rate, a.to_rate, a.over_s, span, rng, count)
        if not plan.offsets_s:
            raise WorkloadError(
                f"workloads.{w.name}.arrival: nothing to send: the ramp's schedule (seed {w.seed}) "
                f"holds no arrival within its {span:g} s (from_rate {a.from_rate:g} -> to_rate "
                f"{a.to_rate:g} over_s {a.over_s:g}); raise the rates or lengthen the span"
            )
        n = len(plan.offsets_s)
    if w.arrival.kind == "ramp" and w.arrival.to_concurrency is not None:
        plan.stream_starts_s = stream_starts(
            w.arrival.from_concurrency,
            w.arrival.to_concurrency,
            w.arrival.over_s,
        )
    # a file must hold a conversation for every request (session) of the point, unless its prompts may repeat
    needed = 1 if w.prompts.cycle else n_warmup + n
    texts, plan.source_sha256 = _texts(w, needed, 1)
    material = _Material(tok, texts, rng)
    out_cap = max_model_len - 1 if max_model_len else None
    if w.sessions:
        plan.warmup_sessions = _sessions(w, tok, material, n_warmup, rng, out_cap, max_model_len, "w", one_turn=True)
        plan.sessions = _sessions(w, tok, material, n, rng, out_cap, max_model_len, "s")
        return plan
    total = n_warmup + n
    plan.warmup = n_warmup
    # warm-up requests are drawn from the spec; a trace's measured requests carry their own lengths
    drawn = n_warmup if trace is not None else total
    outs = draw(w.output, drawn, rng, out_cap)
    ins = [draw(w.input, 1, rng, (max_model_len - o) if max_model_len else None)[0] for o in outs]
    if trace is not None:
        outs += [r.output_length for r in trace.requests]
        ins += [r.input_length for r in trace.requests]
    groups = _prefix_groups(w, rng, total)
    prefixes: dict[Any, tuple[str, list[int]]] = {}  # a trace's blocks: (text, ids)
    shared: dict[int, tuple[str, list[int]]] = {}  # the prefix groups' (text, ids)
    filler = _filler(tok, rng)
    for i in range(total):
        n_in, n_out = ins[i], outs[i]
        group: int | None = None
        if (
            trace is not None
            and i >= n_warmup
            and (trace.requests[i - n_warmup].hash_ids or trace.requests[i - n_warmup].prefix_group is not None)
        ):
            req = trace.requests[i - n_warmup]
            text, group = _trace_prompt(tok, req, n_in, w.arrival.block_tokens, prefixes, material.ids, filler, chat)
        elif groups is not None:
            group = groups[i]
            if group not in shared:
                shared[group] = _prefix_text(tok, material.ids, w.prefix.tokens, filler)
            text = _prefixed(tok, shared[group], material.ids, n_in, filler, chat)
        else:
            ids = material.ids(n_in)
            text = _chat_text(tok, ids, n_in, filler) if chat else exact_text(tok, ids, n_in, filler)
        plan.prompts.append(BuiltPrompt(text, n_in))
        plan.metas.append(RequestMeta(n_in, n_out, prefix_group=group))
    return plan


def _scheduled_count(w: Workload) -> int:
    """Requests a duration-bound open loop needs (1.5 × rate × duration + 16), when no count is given."""
    a = w.arrival
    rate = a.rate or max(a.from_rate or 0, a.to_rate or 0) or 1.0
    return int(rate * (a.duration_s or a.over_s or 60.0) * 1.5) + 16


def _prefix_groups(w: Workload, rng: np.random.Generator, n: int) -> list[int] | None:
    """Each request's prefix group, uniformly and seeded; None without shared prefixes."""
    if w.prefix is None:
        return None
    return rng.integers(0, w.prefix.groups, size=n).tolist()


def _trace_prompt(
    tok: PromptTokenizer,
    req: Any,
    n_in: int,
    block_tokens: int,
    blocks: dict[Any, tuple[str, list[int]]],
    more: Any,
    filler: Iterator[int],
    chat: bool,
) -> tuple[str, int | None]:
    """A trace request's prompt: its ``hash_ids`` blocks, each the same ``block_tokens`` token ids wherever it
    recurs (Mooncake's prompt blocks: requests that share leading blocks share a prefix), as many whole blocks as
    fit, then its own tokens up to its input length; a ``prefix_group`` is one shared block. Returns the text and
    the request's group (its first block)."""
    keys = list(req.hash_ids or ()) or [("group", req.prefix_group)]
    special = 0 if chat else len(tok.encode("", True))
    text, ids = "", []
    for k in keys:
        if k not in blocks:
            g = _filler(tok, np.random.default_rng(int(hashlib.sha256(repr(k).encode()).hexdigest()[:8], 16)))
            blocks[k] = _prefix_text(tok, lambda m: [next(g) for _ in range(m)], block_tokens, g)  # noqa: B023 - called within this iteration
        if len(ids) + len(blocks[k][1]) >= n_in - special:
            break
        text, ids = text + blocks[k][0], ids + blocks[k][1]
    group = keys[0] if isinstance(keys[0], int) else req.prefix_group
    if not ids:  # not one whole block fits: a request of its own
        own = more(n_in)
        return (_chat_text(tok, own, n_in, filler) if chat else exact_text(tok, own, n_in, filler)), group
    return _prefixed(tok, (text, ids), more, n_in, filler, chat), group


def _sessions(
    w: Workload,
    tok: PromptTokenizer,
    material: _Material,
    n: int,
    rng: np.random.Generator,
    out_cap: int | None,
    max_model_len: int | None,
    prefix: str,
    one_turn: bool = False,
) -> list[SessionPlan]:
    """``n`` sessions: turns drawn, each user message built to its drawn length (content tokens exact; the
    turn's whole prompt is counted through the chat template when it is sent), each output length drawn."""
    assert w.turns is not None
    out = []
    for s in range(n):
        turns = 1 if one_turn else max(1, draw(w.turns, 1, rng)[0])
        conv = material.texts[int(rng.integers(0, len(material.texts)))] if material.texts else ()
        texts, outs = [], []
        for t in range(turns):
            n_out = draw(w.output, 1, rng, out_cap)[0]
            n_in = draw(w.input, 1, rng, (max_model_len - n_out) if max_model_len else None)[0]
            ids = material.ids(n_in, conv[t] if t < len(conv) else None)
            texts.append(exact_text(tok, ids, n_in, material.filler, add_special_tokens=False))
            outs.append(n_out)
        out.append(SessionPlan(f"{prefix}{s}", texts, outs))
    return out


def preflight(workloads: Sequence[Workload], max_model_len: int | None = None) -> None:
    """Read every file the workloads name (datasets, traces) before a lane boots anything: a missing, unreadable
    or malformed file fails here with its one line (DatasetError, TraceError), nothing sent; what it read is kept
    for the points."""
    for w in workloads:
        if w.prompts.path:
            _dataset(w.prompts.path, w.prompts.source, w.prompts.split)
        if w.arrival.kind == "trace":
            a = w.arrival
            _trace(a.path, a.time_scale, a.timestamp_unit, max_model_len, a.limit)


def ramp_schedule(
    from_rate: float, to_rate: float, over_s: float, duration_s: float, rng: np.random.Generator, n: int | None = None
) -> list[float]:
    """Poisson arrivals whose rate rises linearly from ``from_rate`` to ``to_rate`` over ``over_s``, then holds,
    until ``duration_s`` (or ``n`` arrivals): unit-rate exponential gaps mapped through the inverse of the
    cumulative rate Λ(t) (time rescaling), so the count in any interval is Poisson with the ramp's mean."""
    slope = (to_rate - from_rate) / over_s
    lam_over = from_rate * over_s + slope * over_s**2 / 2

    def inverse(lam: float) -> float:
        if lam <= lam_over:
            if abs(slope) < 1e-12:
                return lam / from_rate
            return (-from_rate + math.sqrt(from_rate**2 + 2 * slope * lam)) / slope
        return over_s + (lam - lam_over) / to_rate

    out: list[float] = []
    lam = 0.0
    while True:
        lam += float(rng.exponential(1.0))
        t = inverse(lam)
        if (n is None and t >= duration_s) or (n is not None and len(out) >= n):
            return out
        out.append(t)


def stream_starts(from_c: int, to_c: int, over_s: float) -> list[float]:
    """A closed-loop ramp: ``from_c`` streams at 0, then one more every ``over_s / (to_c - from_c)`` seconds."""
    step = over_s / (to_c - from_c) if to_c > from_c else 0.0
    return [0.0] * from_c + [step * (k + 1) for k in range(to_c - from_c)]


def conversation(user_texts: Sequence[str], replies: Sequence[str], turn: int) -> list[dict[str, str]]:
    """The messages of turn ``turn`` (0-based): every earlier user message and reply, then this turn's message."""
    out: list[dict[str, str]] = []
    for i in range(turn):
        out += [{"role": "user", "content": user_texts[i]}, {"role": "assistant", "content": replies[i]}]
    return out + [{"role": "user", "content": user_texts[turn]}]
