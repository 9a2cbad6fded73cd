"""Prompts and conversations from files: ShareGPT JSON, JSONL, Parquet and HF ``save_to_disk`` directories.

Every record becomes the user messages of one conversation, in order: the server generates the replies, so
assistant and system messages are dropped. Accepted record shapes (JSON objects, JSONL lines, Parquet rows,
HF dataset rows):

* ShareGPT: ``{"conversations": [{"from": "human", "value": "..."}, ...]}`` (also ``conversation``);
* OpenAI-style: ``{"messages": [{"role": "user", "content": "..."}, ...]}``;
* one prompt: ``{"prompt": "..."}`` or ``{"text": "..."}``.

Sources are local paths or ``s3://bucket/key`` (an HF directory: a prefix ending in ``/``). Nothing here
touches the Hugging Face hub: ``datasets.load_from_disk`` reads local files only. A file is a regular file of at
most :data:`DATASET_MAX_BYTES`, read as the request reader reads (:func:`pipeline.jsonio.read_bytes`: never a pipe
or a device).

Every bad input raises one :class:`DatasetError` of one line, ``<source>[:<where>]: <what is wrong>``, where
``<where>`` is a line number (JSON, JSONL), ``record N`` (a JSON list's index, from 0) or ``row N`` (Parquet
and HF rows, from 0).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agents.training.catalogue import sha256_file as file_sha256  # one file hash for the project
from pipeline import jsonio
from pipeline.containment import PathEscapeError, contained
from pipeline.lane_configs.bounds import DATASET_MAX_BYTES

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DatasetKind = Literal["sharegpt", "jsonl", "parquet", "hf"]
DATASET_KINDS: tuple[str, ...] = ("sharegpt", "jsonl", "parquet", "hf")

USER_ROLES = frozenset({"human", "user"})
OTHER_ROLES = frozenset({"gpt", "assistant", "system", "chatgpt", "bing", "bard", "model", "tool", "function"})
SHAPE_FIELDS = ("conversations", "conversation", "messages", "prompt", "text")  # in the order they are tried
HF_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
PARQUET_MAGIC = b"PAR1"


class DatasetError(ValueError):
    """A dataset file that cannot be read as prompts; the message is one line naming the file."""


@dataclass(frozen=True)
class Dataset:
    path: str  # as given (local path or s3:// URI)
    kind: str  # "sharegpt" | "jsonl" | "parquet" | "hf"
    sha256: str  # of the file's bytes; a directory: of the sorted "relpath sha256\n" manifest of its files
    conversations: tuple[tuple[str, ...], ...]  # each: the user messages of one conversation, in order
    skipped: int = 0  # records with no user message
    split: str | None = None  # the DatasetDict split read, for kind "hf"

    @property
    def prompts(self) -> list[str]:
        """The first user message of each conversation."""
        return [c[0] for c in self.conversations]

    def require(self, min_conversations: int, min_turns: int = 1) -> None:
        """DatasetError unless ``min_conversations`` are usable (and that many have ``min_turns`` user turns): the
        check :func:`read_dataset` makes, on a dataset already read."""
        _check_counts(
            self.path,
            list(self.conversations),
            Counter({"no user message": self.skipped}) if self.skipped else Counter(),
            min_conversations,
            min_turns,
        )


def read_dataset(
    source: str,
    kind: str | None = None,
    *,
    min_conversations: int = 1,
    min_turns: int = 1,
    s3_client: S3Client | None = None,
    download_dir: Path | None = None,
    split: str | None = None,
) -> Dataset:
    """Reads ``source`` (a local path or ``s3://`` URI) into conversations of user messages.

    ``kind`` is inferred when None (see module doc). ``min_conversations``: usable conversations needed;
    ``min_turns``: at least ``min_conversations`` of them must have this many user turns (multi-turn
    workloads). ``split``: the split of an HF DatasetDict directory (default "train", else the only one).
    S3 objects are downloaded to ``download_dir`` (kept) or to a temporary directory (removed after).
    """
    if kind is not None and kind not in DATASET_KINDS:
        raise DatasetError(f"{source}: unknown kind {kind!r}; valid kinds: {', '.join(DATASET_KINDS)}")
    for name, value in (("min_conversations", min_conversations), ("min_turns", min_turns)):
        if not isinstance(value, int) or value < 1:
            raise DatasetError(f"{source}: {name} must be an integer >= 1, got {value!r}")
    if not source.startswith("s3://"):
        return _read_local(source, Path(source), kind, min_conversations, min_turns, split)
    if download_dir is not None:
        local = download_from_s3(source, Path(download_dir), s3_client)
        return _read_local(source, local, kind, min_conversations, min_turns, split)
    with tempfile.TemporaryDirectory(prefix="neuronpipe-dataset-") as tmp:
        local = download_from_s3(source, Path(tmp), s3_client)
        return _read_local(source, local, kind, min_conversations, min_turns, split)


def download_from_s3(uri: str, dest: Path, s3_client: S3Client | None = None) -> Path:
    """Downloads ``s3://bucket/key`` to ``dest/<basename>``, or every object under a prefix ending in ``/``
    to ``dest/<last prefix part>/<relpath>``; returns the local file or directory."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise DatasetError(f"{uri}: expected s3://bucket/key (or s3://bucket/prefix/ for a directory)")
    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if not key.endswith("/"):
            try:
                target = contained(dest, key.rsplit("/", 1)[-1])
            except PathEscapeError as exc:
                raise DatasetError(f"{uri}: the key names no file to download ({exc})") from exc
            try:
                s3_client.download_file(bucket, key, str(target))
            except ClientError as exc:
                hint = ""
                try:
                    if s3_client.list_objects_v2(Bucket=bucket, Prefix=key + "/", MaxKeys=1).get("KeyCount"):
                        hint = f" (objects exist under {key}/: end the URI with / to read a directory)"
                except ClientError:
                    pass  # no hint; the download's own error says what is wrong
                raise DatasetError(f"{uri}: cannot download: {exc}{hint}") from exc
            return target
        root = dest / (key.rstrip("/").rsplit("/", 1)[-1] or bucket)
        from agents.s3_prefix import download_prefix

        try:
            count = download_prefix(s3_client, bucket, key, root)
        except ValueError as exc:  # a key that would land outside the directory (PathEscapeError)
            raise DatasetError(f"{uri}: {exc}") from exc
    except (ClientError, BotoCoreError) as exc:
        raise DatasetError(f"{uri}: cannot download: {exc}") from exc
    if not count:
        raise DatasetError(f"{uri}: no objects under this prefix")
    return root


def _read_local(
    source: str, path: Path, kind: str | None, min_conversations: int, min_turns: int, split: str | None
) -> Dataset:
    if not os.path.lexists(path):
        raise DatasetError(f"{source}: no such file or directory")
    raw = None
    if not path.is_dir():
        try:  # a regular file only (a pipe or a device would block or never end), within the cap
            raw = jsonio.read_bytes(path, DATASET_MAX_BYTES, why="a prompt file")
        except jsonio.JsonInputError as exc:
            raise DatasetError(f"{source}: {exc}") from None
    kind = _check_kind(source, path, kind, raw)
    if split is not None and kind != "hf":
        raise DatasetError(f"{source}: split {split!r} given, but only kind hf (a DatasetDict) has splits")
    chosen = None
    if raw is None:  # kind hf: a save_to_disk directory
        sha, (rows, chosen) = directory_sha256(path), _hf_rows(source, path, split)
    else:
        sha = hashlib.sha256(raw).hexdigest()
        rows = {"sharegpt": _sharegpt_records, "jsonl": _jsonl_records, "parquet": _parquet_rows}[kind](source, raw)
    conversations, skipped = [], Counter[str]()
    for where, record in rows:
        turns = user_turns(record, f"{source}:{where}")
        if turns:
            conversations.append(turns)
        else:
            skipped["no user message"] += 1
    _check_counts(source, conversations, skipped, min_conversations, min_turns)
    return Dataset(source, kind, sha, tuple(conversations), sum(skipped.values()), chosen)


def _check_kind(source: str, path: Path, kind: str | None, raw: bytes | None) -> str:
    if raw is None:
        if not any((path / m).exists() for m in HF_MARKERS):
            raise DatasetError(
                f"{source}: a directory without {', '.join(HF_MARKERS)}: not an HF save_to_disk directory"
            )
        if kind not in (None, "hf"):
            raise DatasetError(f"{source}: kind {kind} given, but this is an HF save_to_disk directory (kind hf)")
        return "hf"
    if kind == "hf":
        raise DatasetError(f"{source}: kind hf needs a save_to_disk directory, this is a file")
    is_parquet = raw[:4] == PARQUET_MAGIC
    if kind is None:
        inferred = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "sharegpt"}.get(path.suffix.lower())
        if inferred is None:
            raise DatasetError(
                f"{source}: cannot infer the kind from the extension {path.suffix!r} (.json, "
                f".jsonl, .parquet, or an HF directory); pass kind= one of {', '.join(DATASET_KINDS)}"
            )
        kind = inferred
    if is_parquet and kind != "parquet":
        raise DatasetError(f"{source}: kind {kind} given, but this is a Parquet file (kind parquet)")
    if kind == "parquet" and not is_parquet:
        raise DatasetError(f"{source}: kind parquet, but the file does not start with the Parquet magic PAR1")
    return kind


def _decode_lines(source: str, raw: bytes) -> list[str]:
    """The file's lines, decoded as UTF-8 one by one so that a bad byte names its line."""
    if not raw.strip():
        raise DatasetError(f"{source}: the file is empty")
    lines = []
    for no, line in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{source}:{no}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from exc
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def _sharegpt_records(source: str, raw: bytes) -> Iterator[tuple[str, Any]]:
    text = "\n".join(_decode_lines(source, raw))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (one JSON object per line is kind jsonl)" if exc.msg == "Extra data" else ""
        raise DatasetError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg} at column {exc.colno}{hint}") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{source}: expected a JSON list of ShareGPT records, got {_json_type(data)}")
    if not data:
        raise DatasetError(f"{source}: the JSON list is empty")
    for i, record in enumerate(data):
        yield f"record {i}", record


def _jsonl_records(source: str, raw: bytes) -> Iterator[tuple[str, Any]]:
    for no, line in enumerate(_decode_lines(source, raw), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            hint = " (a JSON list of records is kind sharegpt, a .json file)" if line.lstrip().startswith("[") else ""
            raise DatasetError(f"{source}:{no}: invalid JSON: {exc.msg} at column {exc.colno}{hint}") from exc
        if not isinstance(record, dict):
            hint = " (a JSON list of records is kind sharegpt, a .json file)" if isinstance(record, list) else ""
            raise DatasetError(f"{source}:{no}: expected a JSON object, got {_json_type(record)}{hint}")
        yield str(no), record


def _parquet_rows(source: str, raw: bytes) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa

    from analytics.store.base import read_parquet_bytes  # an Arrow-owned buffer: no abort at exit

    try:
        table = read_parquet_bytes(raw)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{source}: cannot read as Parquet: {_one_line(exc)}") from exc
    if table.num_rows == 0:
        raise DatasetError(f"{source}: the Parquet file has no rows")
    for i, row in enumerate(table.to_pylist()):
        yield f"row {i}", row


def _hf_rows(source: str, path: Path, split: str | None) -> tuple[list[tuple[str, Any]], str | None]:
    """Rows of a save_to_disk directory (a Dataset, or one split of a DatasetDict) and the split read."""
    chosen = None
    if (path / "dataset_dict.json").exists():
        try:
            splits = list(json.loads((path / "dataset_dict.json").read_text("utf-8"))["splits"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DatasetError(f"{source}: dataset_dict.json has no readable 'splits' list ({exc})") from exc
        if split is None:
            if "train" in splits or len(splits) == 1:
                split = "train" if "train" in splits else splits[0]
            else:
                raise DatasetError(
                    f"{source}: several splits and none named train; pass split= one of {', '.join(splits)}"
                )
        elif split not in splits:
            raise DatasetError(f"{source}: no split {split!r}; splits: {', '.join(splits)}")
        chosen, path = split, path / split
        if not path.is_dir():
            raise DatasetError(f"{source}: split {split!r} is listed but its directory {split}/ is missing")
    elif split is not None:
        raise DatasetError(f"{source}: split {split!r} given, but this is a single dataset, not a DatasetDict")
    rows = _load_hf_table(source, path)
    if not rows:
        raise DatasetError(f"{source}: the dataset has no rows")
    return [(f"row {i}", row) for i, row in enumerate(rows)], chosen


def _load_hf_table(source: str, path: Path) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        return _read_arrow_files(source, path)
    try:
        loaded = datasets.load_from_disk(str(path))  # local files only; never the hub
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{source}: datasets.load_from_disk failed: {_one_line(exc)}") from exc
    return loaded.to_list()


def _read_arrow_files(source: str, path: Path) -> list[dict[str, Any]]:
    """The rows of ``data-*.arrow`` (Arrow IPC streams, as save_to_disk writes them), in state.json's order."""
    import pyarrow as pa

    files = sorted(path.glob("data-*.arrow"))
    try:
        listed = json.loads((path / "state.json").read_text("utf-8"))["_data_files"]
        files = [path / f["filename"] for f in listed]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no state.json: the data files in name order
    if not files:
        raise DatasetError(f"{source}: no data-*.arrow files")
    rows: list[dict[str, Any]] = []
    for file in files:
        try:
            with pa.memory_map(str(file)) as src:
                rows += pa.ipc.open_stream(src).read_all().to_pylist()
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"{source}: cannot read {file.name}: {_one_line(exc)}") from exc
    return rows


def user_turns(record: Any, where: str) -> tuple[str, ...]:
    """The user messages of one record, in order; ``where`` (``file:line``) prefixes any error."""
    if not isinstance(record, dict):
        raise DatasetError(
            f"{where}: expected an object with a {', '.join(SHAPE_FIELDS)} field, got {_json_type(record)}"
        )
    present = [k for k in SHAPE_FIELDS if record.get(k) is not None]  # Arrow rows hold every column, some null
    if not present:
        found = ", ".join(f"{k} (null)" if v is None else str(k) for k, v in record.items()) or "nothing"
        raise DatasetError(f"{where}: no prompt, text, messages or conversations field (found: {found})")
    field = present[0]
    value = record[field]
    if field in ("prompt", "text"):
        if not isinstance(value, str):
            raise DatasetError(f"{where}: {field} is {_json_type(value)}, expected a string")
        return (value,) if value.strip() else ()
    if not isinstance(value, list):
        raise DatasetError(f"{where}: {field} is {_json_type(value)}, expected a list of messages")
    role_key, text_key = ("role", "content") if field == "messages" else ("from", "value")
    turns = []
    for i, message in enumerate(value):
        at = f"{where}: {field}[{i}]"
        if not isinstance(message, dict):
            raise DatasetError(f"{at} is {_json_type(message)}, expected an object with {role_key} and {text_key}")
        role = message.get(role_key)
        if not isinstance(role, str):
            raise DatasetError(f"{at}.{role_key} is {_json_type(role)}, expected a string")
        role = role.lower()
        if role not in USER_ROLES | OTHER_ROLES:
            raise DatasetError(
                f"{at}.{role_key} is {role!r}; expected one of {', '.join(sorted(USER_ROLES | OTHER_ROLES))}"
            )
        content = message.get(text_key)
        if role not in USER_ROLES and content is None:
            continue  # an assistant message holding only tool calls
        text = _message_text(content, f"{at}.{text_key}")
        if role in USER_ROLES and text.strip():
            turns.append(text)
    return tuple(turns)


def _message_text(content: Any, at: str) -> str:
    """A message's text: a string, or OpenAI content parts ``[{"type": "text", "text": ...}]`` joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p.get("text") for p in content if p.get("type") == "text"]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    raise DatasetError(f"{at} is {_json_type(content)}, expected a string")


def _check_counts(
    source: str, conversations: list[tuple[str, ...]], skipped: Counter[str], min_conversations: int, min_turns: int
) -> None:
    if len(conversations) < min_conversations:
        why = ", ".join(f"{n} {reason}" for reason, n in skipped.items()) or "none skipped"
        raise DatasetError(
            f"{source}: {len(conversations)} usable conversations, {min_conversations} needed "
            f"({sum(skipped.values())} skipped: {why})"
        )
    if min_turns > 1:
        deep = sum(1 for c in conversations if len(c) >= min_turns)
        if deep < min_conversations:
            raise DatasetError(
                f"{source}: {deep} conversations have at least {min_turns} user turns, {min_conversations} needed"
            )


def directory_sha256(path: Path) -> str:
    """SHA-256 of the sorted ``"relpath sha256\\n"`` manifest of every file under ``path``."""
    lines = sorted(f"{f.relative_to(path).as_posix()} {file_sha256(f)}\n" for f in path.rglob("*") if f.is_file())
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
