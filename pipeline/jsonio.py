"""The one JSON reader for what a person or a file hands the project: run requests, lane configs, imported
result files, commit markers.

:func:`read_json` reads a file, :func:`loads` parses text or bytes; :func:`read_bytes` is the file half alone.
Each refuses with one :class:`JsonInputError` whose message is one line naming the problem, and for the
document's content the element's path (``$.lane_config.serve_sweep.repeats``) with line and column:

* a path that is not a regular file (a directory, a named pipe, a device, a socket): checked with ``os.stat``
  (:func:`regular_file_problem`, also for a plan naming a file it reads later)
  before opening, the file opened with ``O_NONBLOCK`` (a pipe swapped in meanwhile never blocks) and checked
  again on the open descriptor; more than ``max_bytes`` (never read past the cap, even when the file grows);
* text that is not UTF-8, or not JSON;
* a key repeated in one object (``json`` alone keeps the last value silently);
* nesting deeper than ``max_depth``: counted over the brackets outside strings before anything is parsed,
  so a deep document is refused instead of raising ``RecursionError``;
* a number literal longer than ``max_number_chars`` characters, refused before it is converted (Python's
  ``int`` refuses more than 4,300 digits with a ``ValueError`` of its own, and converting costs time
  quadratic in the length);
* ``NaN``, ``Infinity``, ``-Infinity`` and a float that overflows to infinity (``1e999``), unless the caller
  allows them (``allow_nan=True``: result files whose producers write NaN for an empty statistic).

Parsing is ``json``'s own with hooks; only when a hook refuses is the document walked a second time, in
Python, to find where. Standard library only: the rules package imports nothing else.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_NUMBER_CHARS = 100
MAX_PATH_PARTS = 16

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"?'  # an unterminated string runs to the end (json reports it)
_BRACKETS = re.compile(_STRING + r"|[\[\]{}]", re.S)
_TOKEN = re.compile(
    r"""[ \t\n\r]*(?:
    (?P<str>"""
    + _STRING
    + r""")
  | (?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)
  | (?P<const>NaN|-?Infinity)
  | (?P<punct>[\[\]{}:,])
  | (?P<word>true|false|null)
)""",
    re.S | re.X,
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NONBLOCK_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class JsonInputError(ValueError):
    """JSON input refused: one line naming the problem (the file, the element's path, line and column)."""


class _Refused(Exception):
    """Raised by a parsing hook; :func:`loads` finds where and turns it into :class:`JsonInputError`."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def regular_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as a regular file (missing, a directory, a pipe, a device), else None: the check
    :func:`read_bytes` makes before it opens anything, for a plan that names a file it does not read yet."""
    if not os.fspath(path):
        return "cannot read '': the path is empty (give a file)"
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        return f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    if not stat.S_ISREG(mode):
        return f"cannot read {path}: it is {_kind(mode)}, not a regular file"
    return None


def directory_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a directory that can be listed, else None."""
    if not os.fspath(path):
        return "cannot read '': the path is empty (give a directory)"
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        return f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    if not stat.S_ISDIR(mode):
        return f"cannot read {path}: it is {'a regular file' if stat.S_ISREG(mode) else _kind(mode)}, not a directory"
    return None


def read_bytes(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, why: str | None = None) -> bytes:
    """At most ``max_bytes`` from the regular file ``path``; ``why`` says where the cap comes from."""
    cap = f" ({why})" if why else ""
    problem = regular_file_problem(path)
    if problem:
        raise JsonInputError(problem)
    try:
        fd = os.open(path, _NONBLOCK_READ)
    except OSError as exc:
        raise JsonInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the check and the open
            raise JsonInputError(f"cannot read {path}: it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > max_bytes:
            raise JsonInputError(f"{path} is {st.st_size:,} bytes, over the cap of {max_bytes:,} bytes{cap}")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise JsonInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if size > max_bytes:  # it grew while being read
        raise JsonInputError(f"{path} is over the cap of {max_bytes:,} bytes{cap}")
    return b"".join(chunks)


def read_json(
    path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, why: str | None = None, **limits: Any
) -> Any:
    """The JSON document in the regular file ``path`` (see :func:`loads` for ``limits``)."""
    return loads(read_bytes(path, max_bytes, why), source=str(path), **limits)


def loads(
    data: str | bytes | bytearray | memoryview,
    source: str | None = None,
    *,
    allow_nan: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_number_chars: int = DEFAULT_MAX_NUMBER_CHARS,
) -> Any:
    """Parse one JSON document (bytes must be UTF-8); ``source`` (a file name) starts every message."""
    prefix = f"{source}: " if source else ""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            head = bytes(data[: exc.start]).decode("utf-8")
            raise JsonInputError(
                f"{prefix}not UTF-8 text (byte {exc.start}: {exc.reason}) {_where(head, len(head))}"
            ) from None
    else:
        text = data
    deep = _too_deep(text, max_depth)
    if deep is not None:
        raise JsonInputError(f"{prefix}nested deeper than {max_depth} levels {_where(text, deep)}")
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_int=_int_hook(max_number_chars),
            parse_float=_float_hook(max_number_chars, allow_nan),
            parse_constant=_constant_hook(allow_nan),
        )
    except json.JSONDecodeError as exc:
        msg = exc.msg.removesuffix(" at")  # "Unterminated string starting at" + where
        raise JsonInputError(f"{prefix}not JSON: {msg} {_where(text, exc.pos)}") from None
    except ValueError as exc:  # a conversion the limits let through (max_number_chars above int's own limit)
        raise JsonInputError(f"{prefix}{exc}") from None
    except _Refused as exc:
        found = _first_refusal(text, max_number_chars, allow_nan)
        problem, pos = found if found else (str(exc), None)
        raise JsonInputError(f"{prefix}{problem}" + (f" {_where(text, pos)}" if pos is not None else "")) from None


# ---- parsing hooks -------------------------------------------------------------------------------------------
def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused("duplicate key")
    return out


def _int_hook(limit: int) -> Callable[[str], int]:
    def parse(literal: str) -> int:
        if len(literal) > limit:
            raise _Refused("number too long")
        return int(literal)

    return parse


def _float_hook(limit: int, allow_nan: bool) -> Callable[[str], float]:
    def parse(literal: str) -> float:
        if len(literal) > limit:
            raise _Refused("number too long")
        value = float(literal)
        if math.isinf(value) and not allow_nan:
            raise _Refused("number overflows a float")
        return value

    return parse


def _constant_hook(allow_nan: bool) -> Callable[[str], float]:
    def parse(literal: str) -> float:
        if not allow_nan:
            raise _Refused(f"{literal} is not allowed")
        return float(literal)

    return parse


# ---- where: depth pre-scan, the refusal walk, path and line:column ------------------------------------------
def _too_deep(text: str, max_depth: int) -> int | None:
    """The offset of the first bracket (outside strings) that opens level ``max_depth + 1``, else None."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c in "]}":
            depth -= 1
    return None


def _first_refusal(text: str, max_number_chars: int, allow_nan: bool) -> tuple[str, int] | None:
    """The first element, in document order, that a hook refuses: (problem, offset)."""
    found: list[tuple[str, int]] = []

    def check(kind: str, token: str, pos: int, keys: set[str] | None) -> bool:
        if kind == "num" and len(token) > max_number_chars:
            found.append((f"number literal of {len(token):,} characters (at most {max_number_chars})", pos))
        elif kind == "num" and not allow_nan and any(c in token for c in ".eE") and math.isinf(float(token)):
            found.append((f"number {token} overflows a float", pos))
        elif kind == "const" and not allow_nan:
            found.append((f"{token} is not allowed (not a number)", pos))
        elif kind == "key" and keys is not None and token in keys:
            found.append((f"duplicate key {json.dumps(token)}", pos))
        return bool(found)

    _walk(text, len(text), check)
    return found[0] if found else None


def _where(text: str, pos: int) -> str:
    path = _walk(text, pos, None)
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return f"at {path} (line {line}, column {column})"


def _walk(text: str, stop: int, check: Callable[[str, str, int, set[str] | None], bool] | None) -> str:
    """Walk the tokens before ``stop`` keeping the path of the current element; ``check`` sees each scalar
    and key and ends the walk by returning True. Returns the path where the walk ended."""
    stack: list[list[Any]] = []  # [kind, key or index, keys seen (objects), expecting a key (objects)]
    pos = 0
    while pos < stop:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == m.start() or m.start(m.lastgroup or 0) >= stop:
            break
        kind, token, start = m.lastgroup, m.group(m.lastgroup or 0), m.start(m.lastgroup or 0)
        pos = m.end()
        top = stack[-1] if stack else None
        if kind == "punct":
            if token in "[{":
                stack.append(["[", 0, None, False] if token == "[" else ["{", None, set(), True])
            elif token in "]}":
                if stack:
                    stack.pop()
            elif token == "," and top is not None:
                if top[0] == "[":
                    top[1] += 1
                else:
                    top[3] = True
            elif token == ":" and top is not None and top[0] == "{":
                top[3] = False
            continue
        if kind == "str" and top is not None and top[0] == "{" and top[3]:
            try:
                key = json.loads(token)
            except ValueError:
                break
            top[1] = key
            if check is not None and check("key", key, start, top[2]):
                break
            top[2].add(key)
            continue
        if check is not None and check(kind or "", token, start, None):
            break
    return _path(stack)


def _path(stack: list[list[Any]]) -> str:
    parts = ["$"]
    for kind, at, _keys, _expecting in stack:
        if kind == "[":
            parts.append(f"[{at}]")
        elif at is not None:
            parts.append(f".{at}" if _NAME.fullmatch(at) else f"[{json.dumps(at)}]")
    if len(parts) > MAX_PATH_PARTS:  # a deep path keeps its ends: the message stays one readable line
        parts = [*parts[: MAX_PATH_PARTS - 4], f"…({len(parts) - MAX_PATH_PARTS + 1} levels)…", *parts[-3:]]
    return "".join(parts)
