"""From what the transport recorded to ``requests`` rows (after the point: JSON is off the measured path)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from agents.loadgen.prompts import PromptTokenizer
from agents.loadgen.transport import Exchange


class MalformedEventError(Exception):
    """An SSE event whose data is not a JSON object."""


class ServerErrorEventError(Exception):
    """The stream carried an ``error`` event instead of choices."""


class EmptyStreamError(Exception):
    """The stream ended without a single content chunk."""


class TruncatedStreamError(Exception):
    """The stream ended cleanly on the wire but without ``[DONE]`` or a finish reason: the answer may be cut,
    so the request is not counted as completed (a truncated stream would flatter every latency)."""


@dataclass
class RawRequest:
    """One request as dispatched: its plan and the transport's record."""

    index: int
    request_id: str
    warmup: bool
    prompt_tokens: int  # as built (the exact count the server should see)
    t_scheduled: int
    exchange: Exchange


@dataclass(frozen=True)
class ClockAnchor:
    """One (perf_counter_ns, wall clock) pair per point: wall times of monotonic stamps without a syscall each."""

    perf_ns: int
    wall: datetime

    @classmethod
    def now(cls) -> ClockAnchor:
        from time import perf_counter_ns, time_ns

        wall_ns = time_ns()
        perf = perf_counter_ns()
        return cls(perf, datetime.fromtimestamp(wall_ns / 1e9, tz=timezone.utc))

    def wall_at(self, perf_ns: int) -> datetime:
        return self.wall + timedelta(microseconds=(perf_ns - self.perf_ns) / 1000)


def _event_data(event: bytes) -> bytes:
    if event.startswith(b"data:"):
        return event[5:]
    lines = [ln[5:] for ln in event.splitlines() if ln.startswith(b"data:")]
    return b"\n".join(lines)


def _chunk_text(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return str(choice.get("text") or "")
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        raise TypeError(f"'delta' is a JSON {type(delta).__name__}, not an object")
    return str(delta.get("content") or delta.get("reasoning_content") or "")


def reply_text(ex: Any) -> str | None:
    """The text a successful streamed exchange carried (a session's reply, for its next turn); None when the
    request failed or its stream does not parse."""
    if ex.error is not None or (ex.status and ex.status != 200):
        return None
    parts = []
    try:
        for _t, event in ex.events:
            data = _event_data(event)
            if data.strip() == b"[DONE]":
                continue
            obj = json.loads(data)
            for choice in (obj.get("choices") or []) if isinstance(obj, dict) else []:
                parts.append(_chunk_text(choice))
    except (ValueError, TypeError, AttributeError):
        return None
    return "".join(parts)


def request_row(
    raw: RawRequest,
    *,
    point_id: str,
    model: str,
    server_config: str | None,
    endpoint: str,
    input_len: int | None,
    output_len: int | None,
    anchor: ClockAnchor,
    tokenizer: PromptTokenizer | None,
    texts_out: dict[str, str] | None = None,
    request_model: str | None = None,
    meta: Any = None,
) -> dict[str, Any]:
    """The ``requests`` row of one request; its generated text goes to ``texts_out`` (not a table column: only
    ``--save-vllm-json`` needs it)."""
    ex = raw.exchange
    t_sent = ex.t_sent
    row: dict[str, Any] = {
        "point_id": point_id,
        "request_id": raw.request_id,
        "request_index": raw.index,
        "model": model,
        "request_model": request_model or model,
        "server_config": server_config,
        "endpoint": endpoint,
        "warmup": raw.warmup,
        "t_scheduled_ns": raw.t_scheduled,
        "t_sent_ns": t_sent,
        "t_done_ns": ex.t_done,
        "client_queue_s": (t_sent - raw.t_scheduled) / 1e9,
        "input_len": input_len,
        "output_len": output_len,
        "http_status": ex.status or None,
        "sent_at": anchor.wall_at(t_sent),
        "ttft_s": None,
        "e2el_s": None,
        "prompt_tokens": None,
        "prompt_tokens_source": None,
        "output_tokens": None,
        "tokens_source": None,
        "error_type": None,
        "error": None,
    }
    if meta is not None:  # a workload's request: its own drawn lengths, prefix group, session and turn
        row.update(
            input_len=meta.input_len,
            output_len=meta.output_len,
            prefix_group=meta.prefix_group,
            session_id=meta.session_id,
            turn_index=meta.turn_index,
            session_turns=meta.session_turns,
        )
    stream, error = _read_stream(ex)
    times = stream.times
    tokens = stream.tokens if stream.per_chunk_usage else [1] * len(times)
    if texts_out is not None:
        texts_out[raw.request_id] = "".join(stream.texts)
    row["chunk_times_s"] = times
    row["chunk_tokens"] = tokens
    row["chunk_tokens_source"] = "usage" if stream.per_chunk_usage and times else "assumed_one"
    if error is not None:
        row.update(success=False, error_type=type(error).__name__, error=str(error))
        return row
    row.update(success=True, ttft_s=times[0], e2el_s=times[-1])
    usage = stream.usage
    if usage and usage.get("prompt_tokens") is not None:
        row.update(prompt_tokens=int(usage["prompt_tokens"]), prompt_tokens_source="usage")
    else:
        row.update(prompt_tokens=raw.prompt_tokens, prompt_tokens_source="built")
    if usage and usage.get("completion_tokens") is not None:
        row.update(output_tokens=int(usage["completion_tokens"]), tokens_source="usage")
    elif tokenizer is not None:
        row.update(output_tokens=len(tokenizer.encode("".join(stream.texts), False)), tokens_source="retokenized")
    else:
        row.update(output_tokens=sum(tokens), tokens_source="chunk_count")
    return row


@dataclass
class _Stream:
    """What a streamed answer carried: each content chunk's time (s after the request was sent), its tokens (from
    the cumulative usage, else one a chunk) and text, whether a finish reason came, the last usage reported."""

    t_sent: int
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    per_chunk_usage: bool = True
    finished: bool = False
    last_cum: int = 0
    usage: dict[str, Any] | None = None

    def add(self, i: int, t: int, event: bytes) -> Exception | None:
        """Event ``i``, received at ``t``; the error it makes of the request (None: it parsed)."""
        try:
            obj = json.loads(_event_data(event))
            if not isinstance(obj, dict):
                raise ValueError(f"a JSON {type(obj).__name__}, not an object")
        except ValueError as exc:
            return MalformedEventError(f"event {i}: {exc}: {event[:200]!r}")
        if obj.get("error") and not obj.get("choices"):
            return ServerErrorEventError(f"event {i}: {json.dumps(obj['error'])[:500]}")
        u = obj.get("usage")
        choices = obj.get("choices")
        if choices is not None and not isinstance(choices, list):
            return MalformedEventError(f"event {i}: 'choices' is a JSON {type(choices).__name__}, not a list")
        if u is not None and not isinstance(u, dict):
            return MalformedEventError(f"event {i}: 'usage' is a JSON {type(u).__name__}, not an object")
        try:
            if choices:
                self._chunk(choices[0], u, t)
            if u:
                for key in ("prompt_tokens", "completion_tokens"):
                    if u.get(key) is not None:
                        int(u[key])
                self.usage = u
        except (TypeError, ValueError) as exc:
            return MalformedEventError(f"event {i}: {exc}")
        return None

    def _chunk(self, choice: Any, u: dict[str, Any] | None, t: int) -> None:
        if not isinstance(choice, dict):
            raise TypeError(f"choices[0] is a JSON {type(choice).__name__}, not an object")
        text = _chunk_text(choice)
        cum = int(u["completion_tokens"]) if u and u.get("completion_tokens") is not None else None
        self.times.append((t - self.t_sent) / 1e9)
        self.texts.append(text)
        self.finished = self.finished or choice.get("finish_reason") is not None
        if cum is not None:
            self.tokens.append(cum - self.last_cum)
            self.last_cum = cum
        else:
            self.per_chunk_usage = False
            self.tokens.append(1)


def _read_stream(ex: Exchange) -> tuple[_Stream, Exception | None]:
    """The exchange's events read in order, up to the first that makes the request an error; an exchange that
    failed on the wire is not read. A stream with no content chunk, or that ended without [DONE] or a finish
    reason, is an error too."""
    stream = _Stream(ex.t_sent)
    error: Exception | None = ex.error
    if error is None:
        for i, (t, event) in enumerate(ex.events):
            error = stream.add(i, t, event)
            if error is not None:
                break
        if error is None and not stream.times:
            error = EmptyStreamError(f"the stream ended without a content chunk ({len(ex.events)} events)")
        if error is None and not (ex.done_marker or stream.finished):
            error = TruncatedStreamError(
                f"the stream ended without [DONE] or a finish reason after {len(stream.times)} content chunks"
            )
    return stream, error
