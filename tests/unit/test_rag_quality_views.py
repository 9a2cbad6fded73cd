"""The rag lane's retrieval quality and load, scored by the views (49_report_rag.sql) and judged by the accuracy
lane's paired verdict: probes run through the real pipeline (chunking, store, ranking, probe scoring) with a lexical
embedder and a lexical reranker standing in for the models, so the outcome is fixed by the shipped corpus alone."""

from __future__ import annotations

import pytest

from agents.rag.corpus import chunk_text, read_corpus, read_probes
from agents.rag.stages import RagPipeline, load_rows, probe_rows
from agents.rag.store import ExactStore
from analytics.report.rag import rag_section
from analytics.store import LocalStore
from analytics.views import connect, view_files_through
from tests.support.attempts import commit, lane_row
from tests.support.rag import DIM, LexicalEmbedder, LexicalReranker

RUN = {"store": "exact", "embedder": "lexical", "backend": "cpu"}


@pytest.fixture(scope="module")
def corpus():
    text, source = read_corpus(None)
    chunks = chunk_text(text, source, 400)
    emb = LexicalEmbedder()
    store = ExactStore()
    store.create(DIM)
    store.ingest([c.chunk_id for c in chunks], emb.embed([c.text for c in chunks]))
    return emb, store, {c.chunk_id: c for c in chunks}, read_probes(None)


def _pipe(corpus, honour_mask: bool) -> RagPipeline:
    emb, store, chunks, _ = corpus
    return RagPipeline(emb, store, chunks, k=3, candidates=10, reranker=LexicalReranker(honour_mask))


def _probe_rows(corpus, honour_mask: bool) -> list[dict]:
    return [{**RUN, "reranker": "lexical-reranker", **r} for r in probe_rows(_pipe(corpus, honour_mask), corpus[3])]


def _load_rows(corpus) -> list[dict]:
    pipe = _pipe(corpus, True)
    questions = [(p.probe_id, p.question) for p in corpus[3]]
    rows = [r for c in (1, 2) for r in load_rows(pipe, questions, c, 6)]
    slo = {"slo_end_to_end_ms": 60_000.0, "slo_percentile": 99.0}
    rows = [{**RUN, "reranker": "lexical-reranker", **slo, **r} for r in rows]
    rows[-1] = {**rows[-1], "ok": False, "latency_s": None, "error": "RuntimeError: boom"}  # a c2 query failed
    return rows


def _missed_rows() -> list[dict]:
    base = {"concurrency": 1, "stage": "end_to_end", "latency_s": 3.0, "ok": True, "level_wall_s": 6.0}
    slo = {"slo_end_to_end_ms": 1000.0, "slo_percentile": 99.0}
    return [{**RUN, **base, **slo, "request_index": i} for i in range(2)]


@pytest.fixture(scope="module")
def runs(corpus, tmp_path_factory):
    """One store, one run per case (each run's reranker tests are their own Holm family), one connection."""
    rows = {
        "masked": {"rag_probes": _probe_rows(corpus, False)},
        "honoured": {"rag_probes": _probe_rows(corpus, True)},
        "load": {"rag_requests": _load_rows(corpus)},
        "missed": {"rag_requests": _missed_rows()},
    }
    store = LocalStore(tmp_path_factory.mktemp("rag"))
    box = lane_row(box_role="inf2", instance_type="inf2.xlarge", backend="cpu")
    for run, tables in rows.items():
        commit(store, run, "rag", lane_runs=box, **tables)
    con = connect(store, view_files=view_files_through("49_report_rag.sql"))
    section = rag_section(con, {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()})
    return {
        run: ({k: [r for r in v if r["run_id"] == run] for k, v in section.items() if k != "method"}, rows[run])
        for run in rows
    }


def test_a_reranker_that_ignores_its_mask_loses_hits_and_the_paired_verdict_calls_it_worse(runs, corpus):
    section, tables = runs["masked"]
    rows = tables["rag_probes"]
    hits = {a: sum(r["hit"] for r in rows if r["arm"] == a) for a in ("cosine", "reranked")}
    quality = {q["arm"]: q for q in section["quality"]}
    assert quality["cosine"]["hits"] == hits["cosine"] and quality["reranked"]["hits"] == hits["reranked"]
    assert hits["cosine"] > hits["reranked"]
    (test,) = section["reranker"]
    assert test["n"] == len(corpus[3]) and test["b"] > test["c"]
    assert test["verdict"] == "worse", test
    assert test["delta_ci_high"] < 0 and test["p_holm"] < 0.05


def test_a_reranker_that_honours_its_mask_is_not_called_worse(runs, corpus):
    section, tables = runs["honoured"]
    (test,) = section["reranker"]
    assert test["verdict"] in ("within noise", "better")
    mrr = {q["arm"]: q["mrr"] for q in section["quality"]}
    expected = {
        a: sum(1.0 / r["rank"] if r["rank"] else 0.0 for r in tables["rag_probes"] if r["arm"] == a) / len(corpus[3])
        for a in ("cosine", "reranked")
    }
    assert mrr == pytest.approx(expected)


def test_the_load_levels_give_stage_percentiles_throughput_and_the_highest_level_meeting_the_slo(runs):
    section, _ = runs["load"]
    stages = {(s["concurrency"], s["stage"]) for s in section["stages"]}
    assert {(1, s) for s in ("embed", "search", "rerank", "end_to_end")} <= stages
    load = {r["concurrency"]: r for r in section["load"]}
    assert load[1]["ok_queries"] == 6 and load[1]["slo_met"] is True
    assert load[2]["failed_queries"] == 1 and load[2]["slo_met"] is False  # a failed query fails the level
    assert load[1]["queries_per_s"] == pytest.approx(6 / load[1]["level_wall_s"])
    (decision,) = section["decision"]
    assert decision["concurrency_at_slo"] == 1 and decision["instance"] == "inf2.xlarge"
    price = decision["usd_per_hour"]
    assert price and decision["usd_per_1k_queries"] == pytest.approx(price / (load[1]["queries_per_s"] * 3600) * 1000)


def test_a_load_missing_the_slo_at_every_level_has_no_price_and_the_decision_says_why(runs):
    section, _ = runs["missed"]
    (decision,) = section["decision"]
    assert decision["concurrency_at_slo"] is None and decision["usd_per_1k_queries"] is None
    assert decision["note"].startswith("no level meets p99 end to end <= 1000 ms")
