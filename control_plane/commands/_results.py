"""Shared input checks of the commands that read a results store (query, report, pull, verify).

Each check refuses bad input with one line (:class:`ResultsInputError`) before anything is read or
written: a results root that is missing or a file, a run id that breaks the store's naming rule or
names no committed run, text that is not UTF-8. :func:`stdout_closed` turns a reader that went away
(``| head``) into a quiet exit instead of a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ResultsInputError(Exception):
    """Bad input to a results command (the message is the one line printed)."""


# What a reader of the store can raise that is the environment's fault, not a bug: one line each.
def read_errors() -> tuple[type[BaseException], ...]:
    from analytics.store import StoreError
    from analytics.views import S3ReaderError

    errors: list[type[BaseException]] = [StoreError, S3ReaderError, OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    except ImportError:  # pragma: no cover - boto3 is a dependency
        pass
    return tuple(errors)


def utf8_text(text: str, what: str) -> str:
    """Text from argv decoded with surrogateescape: refuse bytes that were not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ResultsInputError(f"{what} is not valid UTF-8") from None
    return text


def check_run_ids(run_ids: list[str] | None) -> list[str] | None:
    """The store's naming rule (the one every writer applies), applied at the command line."""
    from analytics.store import validate_component

    for run_id in run_ids or []:
        utf8_text(run_id, "--run-id")
        try:
            validate_component("run_id", run_id)
        except ValueError as exc:
            raise ResultsInputError(str(exc)) from None
    return run_ids


def open_results(uri: str, run_ids: list[str] | None = None, s3_client: Any = None) -> Any:
    """An existing store; every run id given must have committed attempts in it. A path that is not a results store
    (an empty or unrelated directory, a folder inside a store, a folder holding one) is refused naming what it is,
    as ``verify`` refuses it: a typo is never read as an empty store."""
    from analytics.store import StoreError, open_existing_store
    from analytics.store.locate import verify_target_problem

    utf8_text(str(uri), "--results")
    check_run_ids(run_ids)
    try:
        store = open_existing_store(uri, s3_client=s3_client)
        problem, _ = verify_target_problem(store, str(uri))
        if problem:
            raise ResultsInputError(problem)
        known = store.run_ids() if run_ids else []
    except read_errors() as exc:
        raise ResultsInputError(
            str(exc) if isinstance(exc, StoreError) else f"cannot read {uri}: {type(exc).__name__}: {exc}"
        ) from None
    unknown = [r for r in run_ids or [] if r not in known]
    if unknown:
        shown = ", ".join(known[-5:]) or "none"
        raise ResultsInputError(f"unknown run id {', '.join(unknown)} in {uri} (latest runs: {shown})")
    return store


def check_out_dir(path: str) -> str:
    """An output directory that exists as a directory or can be created (no file in the way)."""
    utf8_text(str(path), "--out")
    if not str(path).strip():
        raise ResultsInputError("--out is empty: give a directory")
    probe = os.path.abspath(path)
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ResultsInputError(f"--out {path} is a file, not a directory")
    if probe and not os.path.isdir(probe):
        raise ResultsInputError(f"--out {path}: {probe} is a file, not a directory")
    if probe and not os.access(probe, os.W_OK):
        raise ResultsInputError(f"--out {path}: {probe} is not writable")
    refuse_store_overlap(path, "--out", "directory")
    return path


def refuse_store_overlap(path: str | None, flag: str, target: str, stores: tuple[str | None, ...] = ()) -> None:
    """Rule 16 at the command line: a path inside, at or around a results store that is not the command's own
    target store is refused with one line naming the store (``analytics.store.locate.overlap_problem``)."""
    from analytics.store.locate import overlap_problem

    problem = overlap_problem(path, flag, target, stores)
    if problem:
        raise ResultsInputError(problem)


@contextmanager
def stdout_closed() -> Iterator[None]:
    """A closed stdout (``| head``) ends the command quietly: no traceback, no second error at exit."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout without a descriptor (captured in-process)
            pass
        raise SystemExit(1) from None
