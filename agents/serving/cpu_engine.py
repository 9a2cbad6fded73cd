"""The generation engine behind the neuronpipe server: a real transformers model, iteration-level scheduling.

Up to ``max_num_seqs`` sequences run at once; each scheduler iteration advances every
running sequence by one token (prefill on its first step) with its own KV cache, so
concurrent streams interleave token by token the way a continuous-batching server's do,
and requests beyond ``max_num_seqs`` wait in a queue (visible in ``/metrics``).
Greedy at temperature 0; seeded sampling otherwise. ``min_tokens`` masks EOS until
reached; ``ignore_eos`` never stops at EOS. Nothing here is simulated: every token
comes out of the model's forward pass. The model and every tensor live on ``device``: the CPU (the local
runs) or a CUDA GPU (the ``cuda`` backend's neuronpipe server, where vLLM for CUDA is not installed).
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class EngineStartError(RuntimeError):
    """The scheduler thread did not start (e.g. no address space left for its stack)."""


@dataclass
class TokenEvent:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]
    finish_reason: str | None  # None while generating; "length" | "stop" on the last token


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    max_tokens: int
    emit: Callable[[TokenEvent | BaseException | None], None]  # thread-safe; None = done
    min_tokens: int = 0
    ignore_eos: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    top_logprobs: int = 0
    stop_token_ids: frozenset[int] = frozenset()
    adapter: str | None = None  # the LoRA adapter the request asked for (None: the base model)
    cancelled: threading.Event = field(default_factory=threading.Event)
    # scheduler state
    generated: list[int] = field(default_factory=list)
    cache: Any = None
    generator: Any = None


@dataclass
class EngineStats:
    running: int = 0
    waiting: int = 0
    kv_tokens: int = 0
    kv_capacity_tokens: int = 0
    preemptions_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_finished_total: int = 0


class CpuEngine:
    def __init__(
        self,
        model: Any,
        eos_token_ids: set[int],
        max_num_seqs: int,
        max_model_len: int,
        slowdown: float = 0.0,
        device: str = "cpu",
    ):
        self.model = model
        self.device = device
        # injected slowdown (benchmarks/compare_aa.py): after each forward pass, wait ``slowdown`` times its
        # duration, so every step takes (1 + slowdown) times as long and the run's own noise stays as it was
        self.slowdown = slowdown
        self.eos_token_ids = frozenset(eos_token_ids)
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self._waiting: deque[GenerationRequest] = deque()
        self._running: list[GenerationRequest] = []
        self._cv = threading.Condition()
        self._stop = False
        self._stats = EngineStats(kv_capacity_tokens=max_num_seqs * max_model_len)
        self._thread = threading.Thread(target=self._loop, name="cpu-engine", daemon=True)
        self._running_event = threading.Event()  # set by the thread itself once it runs
        # transformers >= 5.2x names the KV cache `cache`; older releases `past_key_values` (a PEFT model passes
        # it through to its base model: the base's signature says which)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        params = inspect.signature(base.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # a PEFT model with adapters loaded unmerged: every step says whose weights it runs (PEFT's mixed-adapter
        # inference; "__base__" is the base model alone)
        self._lora = hasattr(model, "peft_config")

    def start(self, timeout_s: float = 30.0) -> CpuEngine:
        """Start the scheduler thread and wait until it runs: a thread that could not start (its stack did not
        fit the address space) is an error here, not a server that never answers."""
        self._thread.start()
        if not self._running_event.wait(timeout_s):
            raise EngineStartError(
                f"the engine thread did not start within {timeout_s:g} s"
                + (" (it died: out of memory?)" if not self._thread.is_alive() else "")
            )
        return self

    def shutdown(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=10)

    def submit(self, req: GenerationRequest) -> None:
        with self._cv:
            self._waiting.append(req)
            self._cv.notify()

    def stats(self) -> EngineStats:
        with self._cv:
            s = self._stats
            return EngineStats(
                running=len(self._running),
                waiting=len(self._waiting),
                kv_tokens=sum(len(r.prompt_ids) + len(r.generated) for r in self._running),
                kv_capacity_tokens=s.kv_capacity_tokens,
                preemptions_total=s.preemptions_total,
                prompt_tokens_total=s.prompt_tokens_total,
                generation_tokens_total=s.generation_tokens_total,
                requests_finished_total=s.requests_finished_total,
            )

    # ---- scheduler ------------------------------------------------------------------
    def _loop(self) -> None:
        self._running_event.set()
        import torch

        with torch.inference_mode():
            while True:
                with self._cv:
                    while not self._stop and not self._waiting and not self._running:
                        self._cv.wait()
                    if self._stop:
                        return
                    while self._waiting and len(self._running) < self.max_num_seqs:
                        req = self._waiting.popleft()
                        self._running.append(req)
                        self._stats.prompt_tokens_total += len(req.prompt_ids)
                    batch = list(self._running)
                finished = []
                for req in batch:
                    if req.cancelled.is_set():
                        finished.append(req)
                        continue
                    try:
                        done = self._step(req, torch)
                    except Exception as exc:  # a failed sequence fails its request only
                        log.exception("generation failed")
                        req.emit(exc)
                        done = True
                    if done:
                        finished.append(req)
                with self._cv:
                    for req in finished:
                        self._running.remove(req)
                        req.cache = None
                        self._stats.requests_finished_total += 1

    def _step(self, req: GenerationRequest, torch: Any) -> bool:
        if req.cache is None:
            ids = torch.tensor([req.prompt_ids], dtype=torch.long, device=self.device)
            if req.seed is not None and req.temperature > 0:
                req.generator = torch.Generator(device=self.device).manual_seed(int(req.seed))
        else:
            ids = torch.tensor([[req.generated[-1]]], dtype=torch.long, device=self.device)
        t0 = time.perf_counter()
        kwargs = {self._cache_arg: req.cache}
        if self._lora:
            kwargs["adapter_names"] = [req.adapter or "__base__"]
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **kwargs)
        if self.slowdown > 0:
            time.sleep(self.slowdown * (time.perf_counter() - t0))
        req.cache = getattr(out, self._cache_arg)
        logits = out.logits[0, -1].float()
        if len(req.generated) < req.min_tokens:
            for eos in self.eos_token_ids | req.stop_token_ids:
                if 0 <= eos < logits.shape[-1]:
                    logits[eos] = float("-inf")
        logprobs = torch.log_softmax(logits, dim=-1)
        token = self._choose(logits, req, torch)
        top: list[tuple[int, float]] = []
        if req.top_logprobs > 0:
            vals, idx = torch.topk(logprobs, k=min(req.top_logprobs, logprobs.shape[-1]))
            top = [(int(i), float(v)) for v, i in zip(vals.tolist(), idx.tolist())]
        req.generated.append(token)
        with self._cv:
            self._stats.generation_tokens_total += 1
        finish = None
        if len(req.generated) >= req.max_tokens:
            finish = "length"
        elif not req.ignore_eos and (token in self.eos_token_ids or token in req.stop_token_ids):
            finish = "stop"
        req.emit(TokenEvent(token, float(logprobs[token]), top, finish))
        if finish is not None:
            req.emit(None)
            return True
        return False

    @staticmethod
    def _choose(logits: Any, req: GenerationRequest, torch: Any) -> int:
        if req.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / req.temperature, dim=-1)
        if req.top_p < 1.0:
            sorted_p, sorted_i = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < req.top_p
            probs = torch.zeros_like(probs).scatter(0, sorted_i[keep], sorted_p[keep])
            probs = probs / probs.sum()
        return int(torch.multinomial(probs, 1, generator=req.generator))
