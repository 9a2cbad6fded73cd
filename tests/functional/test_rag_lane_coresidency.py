"""The rag lane when the embedder cannot start beside the served model: the runtime's refusal is a co-residency row
with its own words, the server is stopped, the embedder loads alone and the retrieval is measured without a
generate stage. The runtime and the server are stand-ins (a loader that refuses once, a server that records its
stop); the lane's flow, its store, probes and rows are the product's."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

from agents.context import LaneContext
from analytics.store import LocalStore
from analytics.views import connect
from pipeline.lane_configs.rag import Config
from pipeline.servers import ServerConfig
from tests.support.rag import LexicalEmbedder

REFUSAL = (
    "RuntimeError: The PyTorch Neuron Runtime could not be initialized. Neuron Driver issues are logged\n"
    "to your system logs."
)


def test_an_embedder_refused_beside_the_server_is_a_coresidency_failure_and_retrieval_goes_on_alone(
    tmp_path, monkeypatch
):
    import agents.encoders.text
    import agents.serving
    import agents.serving.session
    import agents.serving.variants
    import agents.training.catalogue
    from agents.lanes import rag

    events: list[str] = []

    @contextmanager
    def serve(ctx, launcher, model, cfg, health_timeout_s):
        events.append(f"boot {dict(cfg.env)}")
        try:
            yield SimpleNamespace(base_url="http://127.0.0.1:9")
        finally:
            events.append("server stopped")

    def load_text_embedder(model, *, backend, workdir, seed=0):
        if "server stopped" not in events:
            events.append("embedder refused")
            raise RuntimeError(REFUSAL.split(": ", 1)[1])
        events.append("embedder alone")
        return LexicalEmbedder()

    monkeypatch.setattr(agents.serving, "get_launcher", lambda backend, cache: SimpleNamespace(backend=backend))
    monkeypatch.setattr(
        agents.serving.variants, "lane_server_configs", lambda ctx, launcher, spec: [ServerConfig("A", 256, 4)]
    )
    monkeypatch.setattr(agents.training.catalogue, "resolve_model", lambda name, cache, profile: tmp_path / name)
    monkeypatch.setattr(agents.serving.session, "serve", serve)
    monkeypatch.setattr(agents.encoders.text, "load_text_embedder", load_text_embedder)
    monkeypatch.setattr("agents.rag.placement.cpu_count", lambda: 2)
    monkeypatch.setattr("pipeline.servers.tenants.cpu_count", lambda: 2)
    monkeypatch.setattr("agents.rag.placement.placed", lambda where: _noop())
    monkeypatch.setattr("agents.rag.stores.open_store", lambda name, workdir, pg_bin=None: _exact())

    store = LocalStore(tmp_path / "results")
    writer = store.begin_attempt("r1", "rag")
    ctx = LaneContext(
        run_id="r1",
        lane="rag",
        attempt=writer.attempt,
        backend="cpu",
        box_role="inf2",
        profile="tiny",
        host="h",
        store=store,
        writer=writer,
        workdir=tmp_path / "work",
        log_dir=tmp_path / "logs",
        cache_dir=tmp_path / "cache",
    )
    rag.run(ctx, Config(reranker=None, concurrency=[1], queries=4))

    assert events[0].startswith("boot {'NEURONPIPE_CPU_AFFINITY': '1'}")  # the server on its own core
    assert events[1:] == ["embedder refused", "server stopped", "embedder alone"]
    writer.commit("succeeded")
    con = connect(store, view_files=["10_serving_requests.sql"])  # the tables alone
    (row,) = con.execute("SELECT outcome, error, embedder_devices, generator_devices FROM rag_coresidency").fetchall()
    assert row == ("failed", REFUSAL, "NEURONPIPE_CPU_AFFINITY=0", "NEURONPIPE_CPU_AFFINITY=1")
    stages = {s for (s,) in con.execute("SELECT DISTINCT stage FROM rag_requests").fetchall()}
    assert stages == {"embed", "search", "end_to_end"}  # no generate: the server was stopped
    (generators,) = con.execute("SELECT count(generator) FROM rag_requests").fetchone()
    assert generators == 0
    (probes,) = con.execute("SELECT count(*) FROM rag_probes WHERE arm = 'cosine'").fetchone()
    assert probes == 26


@contextmanager
def _noop():
    yield


def _exact():
    from agents.rag.store import ExactStore

    return ExactStore()
