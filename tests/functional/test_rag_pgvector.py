"""The rag lane's PostgreSQL stores against a real server: initdb in a directory, a unix socket only, psql sessions,
always stopped. pgvector's own test needs the extension (skipped with the reason where it is not installed: CI has
PostgreSQL without pgvector); the lifecycle, the COPY and the error path need only PostgreSQL (skipped where its
binaries are absent)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.rag.pgvector import PgVectorError, PgVectorStore, PostgresServer, copy_rows, find_bin_dir, has_pgvector
from agents.rag.store import ExactStore

BIN = find_bin_dir()
no_postgres = pytest.mark.skipif(BIN is None, reason="no PostgreSQL binaries (/usr/lib/postgresql/*/bin/initdb)")
HAS_PGVECTOR = BIN is not None and has_pgvector(BIN)
no_pgvector = pytest.mark.skipif(not HAS_PGVECTOR, reason="pgvector is not installed beside PostgreSQL here")


def _vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@no_pgvector
def test_pgvector_builds_its_hnsw_index_finds_what_exact_search_finds_and_stops(tmp_path):
    v, ids = _vectors(300, 16), [f"c{i}" for i in range(300)]
    exact = ExactStore()
    exact.create(16)
    exact.ingest(ids, v)
    store = PgVectorStore(tmp_path / "pg", bin_dir=BIN)
    with store:
        store.create(16)
        store.ingest(ids, v)
        index = store.build_index({"m": 8, "ef_construction": 32, "ef_search": 100})
        assert index.index_type == "hnsw"
        assert index.params | {"pgvector": None} == {
            "m": 8,
            "ef_construction": 32,
            "ef_search": 100,
            "ops": "vector_cosine_ops",
            "pgvector": None,
        }
        assert store.version  # the extension's own version, as it reports it
        assert store._query("SHOW hnsw.ef_search;") == ["100"]
        for q in v[:5]:
            got, want = store.search(q, 5), exact.search(q, 5)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert [d for _, d in got] == pytest.approx([d for _, d in want], abs=1e-5)
        server = store.server
        assert server.is_running()
    assert not server.running and not server.is_running()


@no_postgres
def test_plain_postgresql_starts_on_a_socket_copies_rows_and_stops_on_every_path(tmp_path):
    server = PostgresServer(tmp_path / "pg", bin_dir=BIN)
    server.start()
    try:
        s = server.session()
        assert s.query("SHOW listen_addresses;") == [""]  # no TCP: the unix socket only
        s.query("CREATE TABLE chunks (id text PRIMARY KEY, embedding text);")
        s.query("COPY chunks (id, embedding) FROM STDIN;", copy_rows(["a", "b"], _vectors(2, 3)))
        assert s.query("SELECT id FROM chunks ORDER BY id;") == ["a", "b"]
        with pytest.raises(PgVectorError, match='extension "neuronpipe_absent" is not available'):
            s.query("CREATE EXTENSION neuronpipe_absent;")  # PostgreSQL's own words, as a missing pgvector gives
        s.close()
    finally:
        server.stop()
    assert not server.running and not server.is_running()


def test_copy_rows_refuse_an_id_that_would_break_the_copy_format():
    with pytest.raises(ValueError, match="tab, newline or backslash"):
        copy_rows(["a\tb"], _vectors(1, 2))
