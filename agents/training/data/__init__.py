"""Instruction data: the bundled set (``instructions.jsonl``, dolly-15k's record format) and loaders.

A record has ``instruction``, ``context``, ``response`` and ``category`` (the
databricks-dolly-15k fields). ``load_instructions()`` reads the bundled file;
``load_instructions(path_or_s3_uri)`` reads the real dolly-15k JSONL (on the
boxes it comes from S3). Prompts are built as chat messages and rendered by the
model's own chat template, never by a hand-made string format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_s3 import S3Client

BUNDLED_PATH = Path(__file__).with_name("instructions.jsonl")
FIELDS = ("instruction", "context", "response", "category")


class DatasetFormatError(ValueError):
    """A JSONL line is not a dolly-format record (names the source and line)."""


@dataclass(frozen=True)
class InstructionSet:
    records: tuple[dict[str, str], ...]
    sha256: str  # of the bytes read
    source: str
    bytes: int = 0

    def __len__(self) -> int:
        return len(self.records)


def parse_jsonl(data: bytes, source: str) -> list[dict[str, str]]:
    out = []
    for n, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{source}:{n}: not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise DatasetFormatError(f"{source}:{n}: expected an object with {', '.join(FIELDS)}")
        missing = [f for f in ("instruction", "response") if not isinstance(raw.get(f), str) or not raw[f].strip()]
        if missing:
            raise DatasetFormatError(
                f"{source}:{n}: missing or empty field(s) {', '.join(missing)}; a record needs {', '.join(FIELDS)}"
            )
        out.append(
            {
                "instruction": raw["instruction"],
                "context": raw.get("context") or "",
                "response": raw["response"],
                "category": raw.get("category") or "",
            }
        )
    if not out:
        raise DatasetFormatError(f"{source}: no records")
    return out


def read_source(source: str | Path, s3_client: S3Client | None = None) -> bytes:
    text = str(source)
    if text.startswith("s3://"):
        bucket, _, key = text[5:].partition("/")
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3")
        return s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return Path(text).expanduser().read_bytes()


def load_instructions(
    source: str | Path | None = None, limit: int | None = None, s3_client: S3Client | None = None
) -> InstructionSet:
    """The bundled set (``source`` None), or a dolly-format JSONL at a path or ``s3://`` URI."""
    src = str(source) if source else str(BUNDLED_PATH)
    data = read_source(src, s3_client)
    records = parse_jsonl(data, src)
    if limit is not None:
        records = records[:limit]
    return InstructionSet(tuple(records), hashlib.sha256(data).hexdigest(), src, len(data))


def user_message(record: dict[str, str]) -> str:
    """The user turn: the instruction, then the context (if any) after a blank line."""
    ctx = record.get("context", "").strip()
    return record["instruction"].strip() + (f"\n\n{ctx}" if ctx else "")


def to_prompt_completion(record: dict[str, str]) -> dict[str, list[dict[str, str]]]:
    """trl's conversational prompt-completion example (loss on the completion only)."""
    return {
        "prompt": [{"role": "user", "content": user_message(record)}],
        "completion": [{"role": "assistant", "content": record["response"].strip()}],
    }


def to_messages(record: dict[str, str]) -> list[dict[str, str]]:
    pc = to_prompt_completion(record)
    return pc["prompt"] + pc["completion"]


def render_prompt(tokenizer: Any, record: dict[str, str]) -> str:
    """The generation prompt for ``record`` through the model's chat template."""
    return tokenizer.apply_chat_template(
        to_prompt_completion(record)["prompt"], tokenize=False, add_generation_prompt=True
    )


def corpus_text(records: Iterable[dict[str, str]]) -> list[str]:
    """Plain texts for training a tokenizer on the records."""
    out = []
    for r in records:
        out.extend(t for t in (r["instruction"], r.get("context", ""), r["response"]) if t)
    return out


def sample(records: Sequence[dict[str, str]], n: int) -> list[dict[str, str]]:
    """The first ``n`` records, cycling when the set is smaller (deterministic)."""
    return [records[i % len(records)] for i in range(n)]
