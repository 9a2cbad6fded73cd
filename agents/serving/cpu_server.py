"""A real OpenAI-compatible server: a transformers model behind vLLM's HTTP surface, on the CPU or a CUDA GPU.

Why our own: ``transformers serve`` (5.24) streams through a text streamer that holds
tokens back until they decode to clean text, so one SSE event is not one token (a run
of byte-level tokens arrives as one event, or none at all on the chat endpoint), which
makes TTFT/ITL per token unmeasurable; it also ignores ``logprobs``, rejects vLLM's
``ignore_eos``/``min_tokens`` and has no ``/metrics``. This server emits one event per
generated token, honours vLLM's request extensions (``ignore_eos``, ``min_tokens``,
``truncate_prompt_tokens``, ``stream_options.include_usage`` and
``continuous_usage_stats``), returns logprobs, and exports vLLM-named Prometheus gauges.

    python -m agents.serving.cpu_server --model DIR --served-model-name NAME --port P \
        --max-model-len 256 --max-num-seqs 8 [--device cuda --dtype bfloat16]

It is the ``cpu`` backend's default server and, with ``--device cuda``, the ``cuda`` backend's where vLLM for CUDA
is not installed (``NEURONPIPE_CUDA_SERVER=neuronpipe``): one sequence per forward pass, no paged KV cache, so its
GPU figures measure this server, not what vLLM would get out of the same GPU.

Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, /health, /metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.serving.cpu_engine import CpuEngine, EngineStartError, GenerationRequest, TokenEvent
from agents.serving.openai_protocol import (
    ProtocolError,
    chat_chunk,
    completion_chunk,
    final_usage_chunk,
    parse_sampling,
    prometheus_text,
    stop_index,
    usage,
)
from pipeline.quick_exit import skip_final_collection
from pipeline.servers import INT8_WEIGHT_ONLY

log = logging.getLogger("agents.serving.cpu_server")
# a slowdown injected into every forward pass (benchmarks/compare_aa.py sets it between runs); unset: none
SLOWDOWN_ENV = "NEURONPIPE_CPU_SERVER_SLOWDOWN"


AFFINITY_ENV = "NEURONPIPE_CPU_AFFINITY"  # the cores this server runs on (a tenant's share)


def _vm_size_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


# Address space the server needs beside its KV pool once the model is loaded (the engine's and the event loop's
# thread stacks, the HTTP server's buffers): outside the cap, so a pool that fits the cap boots and one that does
# not fails at once, instead of a full address space failing a thread's start and hanging the boot.
RUNTIME_HEADROOM_MIB = 64


def reserve_kv_pool(config: Any, max_model_len: int, max_num_seqs: int, cap_mib: float) -> Any:
    """A device's limit on the CPU: ``cap_mib`` is the memory the KV cache may take, as a device's free memory is
    for vLLM. The whole cache a server of these settings holds (layers x KV heads x head_dim x K,V x float32 x
    max_model_len x max_num_seqs, the grid's arithmetic) must fit it, as vLLM sizes its cache blocks against the
    device; one that does not fails the boot with an out-of-memory line (the boot classifier's OOM), one that
    does is reserved for real with the process's address space capped at what it uses now, plus the cap, plus
    :data:`RUNTIME_HEADROOM_MIB` for the server's own threads and buffers. Decided by the arithmetic rather than
    by where the allocator happens to hit the limit: the room glibc's arenas hold differs from boot to boot, so a
    limit found by the allocator alone was not monotonic in max_num_seqs (a bisection needs it to be)."""
    import resource

    import torch

    from agents.loadgen.grid import kv_bytes_per_token

    per_token, _ = kv_bytes_per_token(config.to_dict(), dtype_bytes=4)  # the grid's arithmetic, float32
    pool = per_token * max_model_len * max_num_seqs
    cap = int(cap_mib * 2**20)

    def out_of_memory(why: str) -> None:
        log.error(
            "out of memory: the KV pool of %.1f MiB (%d B/token x max_model_len %d x max_num_seqs %d) does "
            "not fit the memory cap of %g MiB: %s",
            pool / 2**20,
            per_token,
            max_model_len,
            max_num_seqs,
            cap_mib,
            why,
        )
        raise SystemExit(1)

    if pool > cap:
        out_of_memory(f"{pool - cap} B over")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size_bytes() + cap + RUNTIME_HEADROOM_MIB * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        tensor = torch.zeros(pool // 4, dtype=torch.float32)
    except (RuntimeError, MemoryError) as exc:
        out_of_memory(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    log.info("KV pool reserved: %.1f MiB of the %g MiB cap", pool / 2**20, cap_mib)
    return tensor


class AdapterLoadError(RuntimeError):
    """A ``--lora-modules`` adapter that cannot be served: missing, not an adapter, or above ``--max-lora-rank``."""


def load_adapters(model: Any, modules: list[tuple[str, str]], max_lora_rank: int) -> Any:
    """``model`` with each adapter loaded unmerged under its name (PEFT); vLLM's refusals where vLLM refuses: an
    adapter whose rank is above ``max_lora_rank``."""
    from peft import PeftModel

    for i, (name, path) in enumerate(modules):
        cfg_file = Path(path) / "adapter_config.json"
        try:
            rank = int(json.loads(cfg_file.read_text())["r"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AdapterLoadError(
                f"LoRA adapter {name!r} at {path}: no readable adapter_config.json with a rank "
                f"({type(exc).__name__}: {exc})"
            ) from None
        if rank > max_lora_rank:
            raise AdapterLoadError(
                f"LoRA adapter {name!r}: its rank {rank} is greater than max_lora_rank {max_lora_rank}"
            )
        if i == 0:
            model = PeftModel.from_pretrained(model, path, adapter_name=name)
        else:
            model.load_adapter(path, adapter_name=name)
    return model


class ModelRuntime:
    """The loaded model, its tokenizer and the engine (and its LoRA adapters, served unmerged, by name)."""

    def __init__(
        self,
        model_dir: str,
        served_name: str,
        max_model_len: int,
        max_num_seqs: int,
        dtype: str = "float32",
        threads: int = 1,
        slowdown: float = 0.0,
        memory_cap_mib: float | None = None,
        lora_modules: list[tuple[str, str]] | None = None,
        max_lora_rank: int = 16,
        device: str = "cpu",
        quantization: str | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(max(1, threads))
        self.served_name = served_name
        self.max_model_len = max_model_len
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if quantization is not None:  # a prepared int8 checkpoint (agents.serving.int8_weights)
            from agents.serving.int8_weights import load_int8_model

            model = load_int8_model(Path(model_dir), getattr(torch, dtype))
        else:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
        model.to(device)
        model.eval()
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.kv_pool = (
            reserve_kv_pool(model.config, max_model_len, max_num_seqs, memory_cap_mib) if memory_cap_mib else None
        )
        self.adapters = {name: path for name, path in lora_modules or []}
        if self.adapters:
            model = load_adapters(model, list(self.adapters.items()), max_lora_rank).to(device)
            model.eval()
        self.engine = CpuEngine(model, eos_ids, max_num_seqs, max_model_len, slowdown, device).start()

    def encode_prompt(self, prompt: Any) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
        raise ProtocolError(400, "prompt must be a string, a list of token ids, or a one-element list of either")

    def encode_chat(self, messages: Any) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise ProtocolError(400, "messages must be a non-empty list")
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        return [int(t) for t in ids]


class IncrementalText:
    """Decodes the generated tokens so far and hands out only the new, complete text."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def push(self, token_id: int, final: bool) -> str:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd") and not final:
            return ""  # an incomplete UTF-8 sequence: wait for the next token
        delta = text[len(self.sent) :] if text.startswith(self.sent) else text
        self.sent = text
        return delta


def _token_str(tokenizer: Any, token_id: int) -> str:
    return tokenizer.decode([token_id], skip_special_tokens=False)


def build_app(rt: ModelRuntime) -> Any:
    from aiohttp import web

    async def health(_req: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(_req: web.Request) -> web.Response:
        return web.json_response(_model_list(rt))

    async def metrics(_req: web.Request) -> web.Response:
        return web.Response(
            text=prometheus_text(rt.engine.stats(), rt.served_name), content_type="text/plain", charset="utf-8"
        )

    async def completions(req: web.Request) -> web.StreamResponse:
        return await _generate(rt, req, chat=False)

    async def chat(req: web.Request) -> web.StreamResponse:
        return await _generate(rt, req, chat=True)

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def _model_list(rt: ModelRuntime) -> dict[str, Any]:
    """GET /v1/models: the served model, then each adapter as vLLM lists it (its own id, its files as root, the
    base model as parent)."""
    card = {
        "id": rt.served_name,
        "object": "model",
        "owned_by": "neuronpipe",
        "max_model_len": rt.max_model_len,
        "root": rt.served_name,
        "parent": None,
    }
    cards = [card] + [
        {
            "id": name,
            "object": "model",
            "owned_by": "neuronpipe",
            "max_model_len": rt.max_model_len,
            "root": path,
            "parent": rt.served_name,
        }
        for name, path in rt.adapters.items()
    ]
    return {"object": "list", "data": cards}


@dataclass
class _Reply:
    """One request's answer in the making: what it asked for, the engine's events, the text decoded so far."""

    chat: bool
    rid: str
    created: int
    name: str  # the model the request asked for (vLLM answers with it)
    n_prompt: int
    sp: Any
    gen: GenerationRequest
    text: IncrementalText
    queue: asyncio.Queue


def _parse_body(rt: ModelRuntime, body: Any, chat: bool) -> tuple[list[int], Any, Any]:
    """(prompt token ids, sampling parameters, the model asked for) of a request body; ProtocolError (or the
    ValueError/TypeError of a malformed field) when it cannot be served."""
    if not isinstance(body, dict):
        raise ProtocolError(400, "request body must be a JSON object")
    asked = body.get("model")
    if asked not in (None, rt.served_name) and asked not in rt.adapters:
        raise ProtocolError(404, f"The model `{asked}` does not exist.")
    prompt_ids = rt.encode_chat(body.get("messages")) if chat else rt.encode_prompt(body.get("prompt"))
    sp = parse_sampling(body, chat=chat, prompt_len=len(prompt_ids), max_model_len=rt.max_model_len)
    return prompt_ids, sp, asked


async def _generate(rt: ModelRuntime, req: Any, chat: bool) -> Any:
    """POST /v1/completions and /v1/chat/completions: the request submitted to the engine, answered whole or
    streamed one event per token; its sequence is cancelled however the answer ends."""
    from aiohttp import web

    try:
        body = await req.json()
        prompt_ids, sp, asked = _parse_body(rt, body, chat)
    except ProtocolError as exc:
        return web.json_response(exc.body(), status=exc.status)
    except (json.JSONDecodeError, ValueError, TypeError) as exc:
        err = ProtocolError(400, f"{type(exc).__name__}: {exc}")
        return web.json_response(err.body(), status=err.status)
    if sp.truncate_prompt_tokens:
        prompt_ids = prompt_ids[-sp.truncate_prompt_tokens :]
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[TokenEvent | BaseException | None] = asyncio.Queue()
    gen = GenerationRequest(
        prompt_ids=prompt_ids,
        max_tokens=sp.max_tokens,
        min_tokens=sp.min_tokens,
        ignore_eos=sp.ignore_eos,
        temperature=sp.temperature,
        top_p=sp.top_p,
        seed=sp.seed,
        top_logprobs=sp.top_logprobs if sp.logprobs else 0,
        adapter=asked if asked in rt.adapters else None,
        emit=lambda ev: loop.call_soon_threadsafe(queue.put_nowait, ev),
    )
    rid = req.headers.get("X-Request-Id") or f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    created = int(time.time())
    name = gen.adapter or rt.served_name  # vLLM answers with the model the request asked for
    rt.engine.submit(gen)
    reply = _Reply(chat, rid, created, name, len(prompt_ids), sp, gen, IncrementalText(rt.tokenizer), queue)
    try:
        if not sp.stream:
            return await _collect(rt, reply)
        return await _stream(rt, req, reply)
    except (ConnectionResetError, asyncio.CancelledError):
        gen.cancelled.set()
        raise
    finally:
        gen.cancelled.set()  # no-op for a finished sequence; frees a slot when the client went away


async def _stream(rt: ModelRuntime, req: Any, reply: _Reply) -> Any:
    """The answer as server-sent events, one per generated token (a stop string's possible start held back)."""
    from aiohttp import web

    sp, text, chat, rid, created, name = reply.sp, reply.text, reply.chat, reply.rid, reply.created, reply.name
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(req)
    n_out = 0
    shown = 0  # characters of text.sent already streamed (stop strings: a possible start is held back)
    hold = max((len(x) for x in sp.stop), default=1) - 1
    while True:
        ev = await reply.queue.get()
        if ev is None:
            break
        if isinstance(ev, BaseException):
            await resp.write(f"data: {json.dumps({'error': {'message': str(ev)}})}\n\n".encode())
            break
        n_out += 1
        delta = text.push(ev.token_id, ev.finish_reason is not None)
        finish = ev.finish_reason
        if sp.stop:
            cut = stop_index(text.sent, sp.stop)
            if cut is not None:
                finish = "stop"
                end = cut
            else:
                end = len(text.sent) if finish is not None else max(shown, len(text.sent) - hold)
            delta, shown = text.sent[shown:end], end
        lp = _logprob_entry(rt, ev, chat) if sp.logprobs else None
        u = usage(reply.n_prompt, n_out) if sp.continuous_usage else None
        chunk = (
            chat_chunk(rid, created, name, delta, finish, lp, u, first=n_out == 1)
            if chat
            else completion_chunk(rid, created, name, delta, finish, lp, u)
        )
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if finish is not None:
            break  # a stop string ended it (the engine's sequence is cancelled by the caller)
    if sp.include_usage:
        final = final_usage_chunk(rid, created, name, chat, usage(reply.n_prompt, n_out))
        await resp.write(b"data: " + json.dumps(final).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _collect(rt: ModelRuntime, reply: _Reply) -> Any:
    """The whole answer as one JSON body, once the sequence has ended (or a stop string ended it)."""
    from aiohttp import web

    sp, text, gen = reply.sp, reply.text, reply.gen
    events: list[TokenEvent] = []
    while True:
        ev = await reply.queue.get()
        if ev is None:
            break
        if isinstance(ev, BaseException):
            return web.json_response(ProtocolError(500, str(ev)).body(), status=500)
        events.append(ev)
        text.push(ev.token_id, ev.finish_reason is not None)
        cut = stop_index(text.sent, sp.stop) if sp.stop else None
        if cut is not None:  # vLLM's stop strings: the text ends before it, the sequence stops here
            text.sent = text.sent[:cut]
            gen.cancelled.set()
            events[-1] = TokenEvent(ev.token_id, ev.logprob, ev.top, "stop")
            break
        if ev.finish_reason is not None:
            break
    finish = events[-1].finish_reason if events else "length"
    u = usage(reply.n_prompt, len(events))
    if reply.chat:
        lp = {"content": [_logprob_entry(rt, e, True)["content"][0] for e in events]} if sp.logprobs else None
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text.sent},
            "logprobs": lp,
            "finish_reason": finish,
        }
        return web.json_response(
            {
                "id": reply.rid,
                "object": "chat.completion",
                "created": reply.created,
                "model": reply.name,
                "choices": [choice],
                "usage": u,
            }
        )
    lp = None
    if sp.logprobs:
        entries = [_logprob_entry(rt, e, False) for e in events]
        lp = {k: [x for e in entries for x in e[k]] for k in ("tokens", "token_logprobs", "top_logprobs")}
    choice = {"index": 0, "text": text.sent, "logprobs": lp, "finish_reason": finish}
    return web.json_response(
        {
            "id": reply.rid,
            "object": "text_completion",
            "created": reply.created,
            "model": reply.name,
            "choices": [choice],
            "usage": u,
        }
    )


def _logprob_entry(rt: ModelRuntime, ev: TokenEvent, chat: bool) -> dict[str, Any]:
    tok = _token_str(rt.tokenizer, ev.token_id)
    if chat:
        top = [{"token": _token_str(rt.tokenizer, i), "logprob": lp} for i, lp in ev.top]
        return {"content": [{"token": tok, "logprob": ev.logprob, "top_logprobs": top}]}
    return {
        "tokens": [tok],
        "token_logprobs": [ev.logprob],
        "top_logprobs": [{_token_str(rt.tokenizer, i): lp for i, lp in ev.top}],
    }


def device_problem(device: str) -> str | None:
    """Why ``device`` cannot serve here (None: it can): not cpu/cuda/cuda:N, or no CUDA GPU this torch can use."""
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and (kind != "cuda" or not index.isdigit())):
        return "expected cpu, cuda or cuda:N"
    if kind == "cpu":
        return None
    import torch

    if not torch.cuda.is_available():
        return (
            f"this torch ({torch.__version__}, CUDA {torch.version.cuda or 'none'}) sees no CUDA GPU "
            "(a CPU build of torch, or no driver: nvidia-smi says which)"
        )
    if index and int(index) >= torch.cuda.device_count():
        return f"this machine has {torch.cuda.device_count()} CUDA GPU(s)"
    return None


def main(argv: list[str] | None = None) -> int:
    skip_final_collection()
    p = argparse.ArgumentParser(prog="python -m agents.serving.cpu_server", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="local checkpoint directory")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", default="cpu", help="where the model runs: cpu, or cuda / cuda:N (a CUDA GPU)")
    p.add_argument(
        "--slowdown",
        type=float,
        default=float(os.environ.get(SLOWDOWN_ENV) or 0.0),
        help=f"make every forward pass this fraction slower (0.1: 10 %%), for measuring what compare "
        f"detects; default ${SLOWDOWN_ENV} or 0",
    )
    p.add_argument(
        "--memory-cap-mib",
        type=float,
        default=None,
        help="a device's memory limit on the CPU: the address space may grow this much after the model "
        "is loaded, and the whole KV cache (max_model_len x max_num_seqs) is reserved in it at boot "
        "(a pool that does not fit fails the boot: out of memory)",
    )
    p.add_argument(
        "--quantization",
        choices=[INT8_WEIGHT_ONLY],
        default=None,
        help="--model is a checkpoint prepared with this method (int8 weights, a float32 scale per output channel)",
    )
    p.add_argument("--enable-lora", action="store_true", help="serve --lora-modules adapters unmerged (vLLM's flag)")
    p.add_argument(
        "--lora-modules",
        nargs="+",
        default=[],
        metavar="NAME=PATH",
        help="LoRA adapters (PEFT directories) requests ask for by NAME as their model",
    )
    p.add_argument("--max-loras", type=int, default=1, help="vLLM's flag; every adapter stays loaded here")
    p.add_argument("--max-lora-rank", type=int, default=16, help="an adapter of a higher rank fails the boot")
    args = p.parse_args(argv)
    modules = []
    for m in args.lora_modules:
        name, sep, path = m.partition("=")
        if not sep or not name or not path:
            p.error(f"--lora-modules {m!r}: expected NAME=PATH")
        modules.append((name, path))
    if modules and args.quantization:
        p.error("--lora-modules: adapters load on unquantized linear layers; not with --quantization")
    if modules and not args.enable_lora:
        p.error("--lora-modules needs --enable-lora")
    if len({n for n, _ in modules}) != len(modules):
        p.error("--lora-modules: an adapter name given twice")
    affinity = os.environ.get(AFFINITY_ENV)
    if affinity:  # a tenant's cores (pipeline.servers.tenant_placements): pinned before torch starts its threads
        try:
            os.sched_setaffinity(0, {int(c) for c in affinity.split(",")})
        except (ValueError, OSError) as exc:
            p.error(f"{AFFINITY_ENV}={affinity!r}: {exc}")
    problem = device_problem(args.device)
    if problem:
        p.error(f"--device {args.device!r}: {problem}")
    if args.memory_cap_mib is not None and args.device != "cpu":
        p.error("--memory-cap-mib emulates a device's limit on the CPU; a GPU has its own (--device cpu with it)")
    if args.memory_cap_mib is not None and not args.memory_cap_mib > 0:
        p.error(f"--memory-cap-mib must be a number > 0, got {args.memory_cap_mib}")
    if not args.slowdown >= 0:
        p.error(f"--slowdown must be a number ≥ 0, got {args.slowdown}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if affinity:
        log.info("pinned to cores %s", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))))
    from agents.serving.int8_weights import Int8CheckpointError  # torch: the model needs it anyway

    try:
        rt = ModelRuntime(
            args.model,
            args.served_model_name or args.model,
            args.max_model_len,
            args.max_num_seqs,
            args.dtype,
            args.threads,
            args.slowdown,
            args.memory_cap_mib,
            modules,
            args.max_lora_rank,
            args.device,
            args.quantization,
        )
    except AdapterLoadError as exc:
        log.error("%s", exc)
        return 1
    except Int8CheckpointError as exc:
        log.error("%s", exc)
        return 1
    except (EngineStartError, MemoryError) as exc:  # at a memory cap: one line, the boot classifier's OOM
        log.error("out of memory: the server could not start under its memory cap: %s", str(exc) or type(exc).__name__)
        return 1
    from aiohttp import web

    log.info(
        "serving %s as %r on %s:%d (max_model_len=%d, max_num_seqs=%d%s)",
        args.model,
        rt.served_name,
        args.host,
        args.port,
        args.max_model_len,
        args.max_num_seqs,
        (f"; LoRA adapters {', '.join(rt.adapters)} unmerged" if rt.adapters else "")
        + (f"; weights {args.quantization}" if args.quantization else ""),
    )
    web.run_app(build_app(rt), host=args.host, port=args.port, print=None, access_log=None)
    rt.engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
