"""pgvector on PostgreSQL, started and stopped by the lane: ``initdb`` in the lane's work directory, the server
listening on a unix socket only (``listen_addresses=''``), driven through ``psql`` sessions (one per searching
thread), stopped (``pg_ctl stop -m fast``) on every exit path.

``psql`` rather than a Python driver: the box's bootstrap installs PostgreSQL and pgvector from the OS packages,
and their ``psql`` is all the lane needs; no wheel with a libpq of its own joins the box's environment.

Run as root (a container, this project's tests) PostgreSQL refuses to start: the server's commands then run as the
``postgres`` user (``runuser``) in a directory it owns under the system's temporary directory.
"""

from __future__ import annotations

import glob
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from agents.rag.store import IndexInfo, VectorStore

USER = "neuronpipe"
END = "__neuronpipe_end__"
HNSW_DEFAULTS = {"m": 16, "ef_construction": 64, "ef_search": 40}


class PgVectorError(RuntimeError):
    """PostgreSQL or pgvector failed: the message is its own words (psql's or pg_ctl's last lines)."""


def find_bin_dir(explicit: str | None = None) -> Path | None:
    """PostgreSQL's binaries: ``explicit``, NEURONPIPE_PG_BIN, the newest /usr/lib/postgresql/*/bin, else None."""
    for cand in (explicit, os.environ.get("NEURONPIPE_PG_BIN")):
        if cand:
            return Path(cand)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def has_pgvector(bin_dir: Path) -> bool:
    """Whether pgvector's control file is in the extension directory of this PostgreSQL (``pg_config --sharedir``)."""
    try:
        share = subprocess.run([str(bin_dir / "pg_config"), "--sharedir"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return share.returncode == 0 and (Path(share.stdout.strip()) / "extension" / "vector.control").is_file()


def vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(v, np.float32).tolist()) + "]"


def copy_rows(ids: list[str], vectors: np.ndarray) -> str:
    """COPY ... FROM STDIN text-format rows (id, vector) and the end marker."""
    for i in ids:
        if any(c in i for c in "\t\n\\\r"):
            raise ValueError(f"chunk id {i!r}: tab, newline or backslash")
    return "".join(f"{i}\t{vector_literal(v)}\n" for i, v in zip(ids, vectors)) + "\\.\n"


class PostgresServer:
    """One PostgreSQL cluster in ``root``: :meth:`start`, :meth:`session`, :meth:`stop`."""

    def __init__(self, root: Path, bin_dir: str | Path | None = None) -> None:
        found = find_bin_dir(str(bin_dir) if bin_dir else None)
        if found is None or not (found / "initdb").is_file():
            raise PgVectorError(f"PostgreSQL binaries not found (initdb under {found or '/usr/lib/postgresql/*/bin'})")
        self.bin = found
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="neuronpipe-pg-")) if self.as_root else Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.socket, self.log = self.root / "data", self.root, self.root / "server.log"
        self.running = False

    def _cmd(self, *args: str) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if self.as_root else []) + list(args)

    def _run(self, *args: str) -> None:
        r = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            text = (r.stderr.strip() or r.stdout.strip()).splitlines()[-5:]
            raise PgVectorError(f"{Path(args[0]).name} exited {r.returncode}: {' | '.join(text)}")

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "-N")
        opts = f"-k {self.socket} -c listen_addresses='' -c max_connections=32"
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.log), "-w", "start")
        except PgVectorError as exc:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:] if self.log.exists() else []
            raise PgVectorError(f"{exc} | {' | '.join(tail)}") from None
        self.running = True

    def session(self) -> PsqlSession:
        return PsqlSession(
            self._cmd(
                str(self.bin / "psql"),
                "-h",
                str(self.socket),
                "-U",
                USER,
                "-d",
                "postgres",
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
            )
        )

    def is_running(self) -> bool:
        """Whether a server runs on this cluster's data directory (``pg_ctl status``)."""
        r = subprocess.run(self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "status"), capture_output=True)
        return r.returncode == 0

    def stop(self) -> None:
        if self.running:
            self.running = False
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
            finally:
                if self.as_root:
                    shutil.rmtree(self.root, ignore_errors=True)


class PsqlSession:
    """A psql process fed statements on stdin; :meth:`query` returns its output lines up to an echoed marker."""

    def __init__(self, cmd: list[str]) -> None:
        self._err = tempfile.TemporaryFile(mode="w+")
        self._p = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True, bufsize=1
        )

    def query(self, sql: str, data: str = "") -> list[str]:
        assert self._p.stdin is not None and self._p.stdout is not None
        try:
            self._p.stdin.write(f"{sql}\n{data}\\echo {END}\n")
            self._p.stdin.flush()
        except BrokenPipeError:
            pass
        lines = []
        for line in self._p.stdout:
            if line.rstrip("\n") == END:
                return lines
            lines.append(line.rstrip("\n"))
        self._p.wait(timeout=10)
        self._err.seek(0)
        raise PgVectorError(
            " | ".join(self._err.read().strip().splitlines()[-3:]) or f"psql exited {self._p.returncode}"
        )

    def close(self) -> None:
        if self._p.poll() is None:
            try:
                self._p.stdin.close()  # type: ignore[union-attr]
                self._p.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._p.kill()
        self._err.close()


class PgVectorStore(VectorStore):
    """Chunks in table ``chunks`` (id text, embedding vector(dim)); an HNSW index with vector_cosine_ops."""

    name = "pgvector"

    def __init__(self, root: Path, bin_dir: str | Path | None = None) -> None:
        super().__init__()
        self.server = PostgresServer(root, bin_dir)
        self._sessions: queue.LifoQueue[PsqlSession] = queue.LifoQueue()
        self._all: list[PsqlSession] = []
        self._lock = threading.Lock()
        self._ef_search: int | None = None
        self.version: str | None = None

    def _session(self) -> PsqlSession:
        try:
            return self._sessions.get_nowait()
        except queue.Empty:
            s = self.server.session()
            with self._lock:
                self._all.append(s)
            if self._ef_search is not None:
                s.query(f"SET hnsw.ef_search = {self._ef_search};")
            return s

    def _query(self, sql: str, data: str = "") -> list[str]:
        s = self._session()
        try:
            return s.query(sql, data)
        finally:
            self._sessions.put(s)

    def create(self, dim: int) -> None:
        self.server.start()
        self._query("CREATE EXTENSION IF NOT EXISTS vector;")
        self.version = (self._query("SELECT extversion FROM pg_extension WHERE extname = 'vector';") or [None])[0]
        self._query(f"CREATE TABLE chunks (id text PRIMARY KEY, embedding vector({int(dim)}));")

    def ingest(self, ids: list[str], vectors: np.ndarray) -> None:
        self._query("COPY chunks (id, embedding) FROM STDIN;", copy_rows(ids, vectors))

    def build_index(self, params: dict[str, Any]) -> IndexInfo:
        p = {**HNSW_DEFAULTS, **params}
        m, efc, efs = int(p["m"]), int(p["ef_construction"]), int(p["ef_search"])
        self._query(
            f"CREATE INDEX chunks_hnsw ON chunks USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {efc});"
        )
        self._ef_search = efs
        for s in list(self._all):
            s.query(f"SET hnsw.ef_search = {efs};")
        self.index = IndexInfo(
            "hnsw",
            {"m": m, "ef_construction": efc, "ef_search": efs, "ops": "vector_cosine_ops", "pgvector": self.version},
        )
        return self.index

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        lit = vector_literal(vector)
        lines = self._query(
            f"SELECT id || '\t' || (embedding <=> '{lit}') FROM chunks ORDER BY embedding <=> '{lit}' LIMIT {int(k)};"
        )
        out = []
        for line in lines:
            cid, _, dist = line.rpartition("\t")
            out.append((cid, float(dist)))
        return out

    def close(self) -> None:
        for s in self._all:
            s.close()
        self._all.clear()
        self.server.stop()
