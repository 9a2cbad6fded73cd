"""One interface over the model servers of every backend: build, boot, health-check, always stop.

A :class:`Launcher` knows how to build a server's command line and environment and
where its compile cache lives. :class:`ServerProcess` runs one: in its own process
group, dying with the lane even on SIGKILL (``PR_SET_PDEATHSIG``), its output kept in
a log file, stopped on every exit path (context manager: normal exit, exceptions,
Ctrl-C and the runner's ``LaneInterrupted``). Every boot yields a ``compiles`` row.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import httpx

from agents.serving.failures import BootFailure, classify_log, tail_lines
from pipeline.servers import ServerConfig

log = logging.getLogger(__name__)

CacheState = Literal["cold", "warm", "none"]
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ServedModel:
    """A model as a server sees it: the name clients ask for and the checkpoint directory.

    ``cache_key`` names its compiled artifacts: weights that differ (a fine-tune served under its
    base model's name) must never load another checkpoint's compiled graphs and sharded weights.
    """

    name: str
    path: Path
    cache_key: str | None = None
    # a quantized checkpoint prepared beside ``path`` that the server loads with it (NxDI's quantized_checkpoints_path)
    quantized_path: Path | None = None

    @property
    def artifact_key(self) -> str:
        return self.cache_key or self.name


class ServerBootError(RuntimeError):
    """The server died or never became healthy; carries the classified failure and the compiles row."""

    def __init__(self, failure: BootFailure, compile_row: dict[str, Any]):
        self.failure = failure
        self.compile_row = compile_row
        super().__init__(failure.message())


class Launcher(ABC):
    """Backend-specific knowledge: the command, the environment, the compile cache."""

    backend: str = ""
    server_kind: str = "vllm"  # which load-generator adapter talks to this server
    artifact_suffixes: tuple[str, ...] = (".neff",)

    @abstractmethod
    def command(self, model: ServedModel, config: ServerConfig, port: int) -> list[str]: ...

    def env(self, model: ServedModel, config: ServerConfig) -> dict[str, str]:
        return {}

    def compile_cache_dir(self, model: ServedModel, config: ServerConfig) -> Path | None:
        """Where this (model, config)'s compiled graphs live; None when the backend compiles nothing ahead."""
        return None

    def cache_state(self, cache_dir: Path | None) -> CacheState:
        """Decided before boot: ``none`` without a cache, ``warm`` when compiled artifacts are already there."""
        if cache_dir is None:
            return "none"
        return "warm" if count_artifacts(cache_dir, self.artifact_suffixes) > 0 else "cold"

    # Which cache compile_cache_dir is (compiles.cache_scope): this model and config's own artifacts dir, or a
    # compiler cache every model shares.
    cache_scope: str = "artifacts_dir"

    def seeded_from_store(self, model: ServedModel, config: ServerConfig) -> bool:
        """Whether this boot's compiled artifacts came from the shared S3 cache this boot (``cache_basis = s3``)."""
        return False

    def shared_cache_dir(self) -> Path | None:
        """The compiler cache every model shares, when compile_cache_dir is a per-model dir (None: no such cache).
        A fresh artifacts dir whose graphs all hit this cache was not a cold boot (see :func:`cache_label`)."""
        return None


SHARED_GRAPH_SUFFIXES = (".neff",)


def cache_label(
    state: CacheState, scope: str, shared_before: int | None, shared_after: int | None
) -> tuple[CacheState, str | None, str | None]:
    """(cache, cache_scope, cache_basis) of a boot, from artifacts counted before and after (observed).

    ``state`` speaks of ``scope`` (the launcher's compile_cache_dir). A per-model artifacts dir that was empty
    (``cold``) while the shared compiler cache already held graphs and gained none is a boot whose every graph hit
    the shared cache: ``warm`` with scope ``shared_compiler_cache`` — a merged fine-tune always gets a fresh
    artifacts dir, and labelling it cold would misreport its boot time as a compile.
    """
    if state == "none":
        return state, None, None
    if (
        state == "cold"
        and scope == "artifacts_dir"
        and shared_before
        and shared_after is not None
        and shared_after == shared_before
    ):
        return "warm", "shared_compiler_cache", "observed"
    if (
        state == "cold"
        and scope == "artifacts_dir"
        and shared_after is not None
        and shared_before is not None
        and shared_after > shared_before
    ):
        return "cold", "shared_compiler_cache", "observed"
    return state, scope, "observed"


def path_slug(name: str) -> str:
    """``name`` (a model id, a config name) as one path component: runs of anything but letters, digits, ``.``, ``_``
    and ``-`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def dir_bytes(path: Path | None) -> int | None:
    if path is None:
        return None
    if not path.exists():
        return 0
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def count_artifacts(path: Path | None, suffixes: tuple[str, ...]) -> int:
    if path is None or not path.exists():
        return 0
    return sum(1 for _r, _d, files in os.walk(path) for n in files if n.endswith(suffixes))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except OSError:
            pass


class ServerProcess:
    """One running server. Use as a context manager; ``boot()`` raises :class:`ServerBootError`."""

    def __init__(
        self,
        launcher: Launcher,
        model: ServedModel,
        config: ServerConfig,
        log_path: Path,
        port: int | None = None,
        health_timeout_s: float = 600.0,
        stop_grace_s: float = 20.0,
        poll_s: float = 0.1,  # a boot's wall time is measured to this; a refused loopback connect costs nothing
    ):
        self.launcher = launcher
        self.model = model
        self.config = config
        self.log_path = log_path
        self.port = port or free_port()
        self.health_timeout_s = health_timeout_s
        self.stop_grace_s = stop_grace_s
        self.poll_s = poll_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.compile_row: dict[str, Any] | None = None
        self._log_start = 0
        self._shared_before: int | None = None  # graphs in the launcher's shared compiler cache before boot

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"

    def __enter__(self) -> ServerProcess:
        try:
            self.boot()
        except BaseException:  # Ctrl-C / LaneInterrupted while waiting for health: __exit__ would not run
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- boot -----------------------------------------------------------------------
    def boot(self) -> dict[str, Any]:
        cache_dir = self.launcher.compile_cache_dir(self.model, self.config)
        state = self.launcher.cache_state(cache_dir)
        shared = self.launcher.shared_cache_dir()
        self._shared_before = count_artifacts(shared, SHARED_GRAPH_SUFFIXES) if shared is not None else None
        bytes_before = dir_bytes(cache_dir)
        artifacts_before = count_artifacts(cache_dir, self.launcher.artifact_suffixes)
        cmd = self.launcher.command(self.model, self.config, self.port)
        # the variant's own environment (e.g. core pinning), then the launcher's (its caches win: RESERVED_ENV)
        env = {**os.environ, **self.config.env_dict(), **self.launcher.env(self.model, self.config)}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        ts = datetime.now(timezone.utc)
        t0 = time.monotonic()
        with open(self.log_path, "ab") as fh:
            fh.write(f"# {ts.isoformat()} boot: {' '.join(cmd)}\n".encode())
            fh.flush()
            self._log_start = fh.tell()  # classify only what this boot's server wrote
            try:
                self.proc = subprocess.Popen(
                    cmd,
                    env=env,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            except OSError as exc:
                failure = BootFailure(classify_log([str(exc)], exited=True).kind, f"{type(exc).__name__}: {exc}")
                row = self._row(ts, state, None, bytes_before, bytes_before, 0, failure)
                raise ServerBootError(failure, row) from exc
        failure = self._wait_healthy(t0)
        wall = time.monotonic() - t0
        new = count_artifacts(cache_dir, self.launcher.artifact_suffixes) - artifacts_before if cache_dir else None
        row = self._row(ts, state, wall, bytes_before, dir_bytes(cache_dir), new, failure)
        self.compile_row = row
        if failure is not None:
            self.stop()
            raise ServerBootError(failure, row)
        log.info(
            "server %s/%s healthy on %s after %.1f s (cache %s)",
            self.model.name,
            self.config.name,
            self.base_url,
            wall,
            state,
        )
        return row

    def _wait_healthy(self, t0: float) -> BootFailure | None:
        assert self.proc is not None
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per poll otherwise
        with httpx.Client(timeout=5.0) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    return classify_log(self._boot_log(), exited=True, returncode=rc)
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return None
                except httpx.HTTPError:
                    pass
                if time.monotonic() - t0 > self.health_timeout_s:
                    return classify_log(self._boot_log(), exited=False, timeout_s=self.health_timeout_s)
                time.sleep(self.poll_s)

    def _boot_log(self) -> list[str]:
        return tail_lines(self.log_path, start=self._log_start)

    def _row(
        self,
        ts: datetime,
        state: CacheState,
        wall: float | None,
        before: int | None,
        after: int | None,
        new: int | None,
        failure: BootFailure | None,
    ) -> dict[str, Any]:
        shared = self.launcher.shared_cache_dir()
        shared_after = count_artifacts(shared, SHARED_GRAPH_SUFFIXES) if shared is not None else None
        state, scope, basis = cache_label(state, self.launcher.cache_scope, self._shared_before, shared_after)
        if state == "warm" and self.launcher.seeded_from_store(self.model, self.config):
            basis = "s3"  # the artifacts this warm boot loaded were fetched from the shared cache this boot
        return {
            "what": "serving_config",
            "model": self.model.name,
            "config": self.config.name,
            "cache": state,
            "cache_scope": scope,
            "cache_basis": basis,
            "wall_s": wall,
            "cache_bytes_before": before,
            "cache_bytes_after": after,
            "new_artifacts": new,
            "succeeded": failure is None,
            "error": None if failure is None else failure.message(),
            "backend": self.launcher.backend,
            "ts": ts,
            "config_fingerprint": self.config.fingerprint(),
            "config_json": self.config.to_json(),
        }

    # ---- stop -----------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        """Terminate the server's whole process group; escalate to SIGKILL after the grace period."""
        proc = self.proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.stop_grace_s)
                except subprocess.TimeoutExpired:
                    log.warning("server pid %s ignored SIGTERM for %.0f s: SIGKILL", proc.pid, self.stop_grace_s)
            _signal_group(proc.pid, signal.SIGKILL)  # stragglers in the group (workers) go too
            return proc.wait(timeout=30)
        finally:
            self.proc = None if proc.poll() is not None else proc


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
