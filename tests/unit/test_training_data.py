"""The bundled instruction set and the dolly-format loader."""

from __future__ import annotations

import io
import json

import pytest

from agents.training.data import (
    BUNDLED_PATH,
    FIELDS,
    DatasetFormatError,
    load_instructions,
    sample,
    to_messages,
    to_prompt_completion,
    user_message,
)


def test_bundled_set_is_a_few_hundred_dolly_records():
    data = load_instructions()
    assert 200 <= len(data) <= 1000
    cats = {r["category"] for r in data.records}
    assert {
        "open_qa",
        "closed_qa",
        "classification",
        "summarization",
        "information_extraction",
        "brainstorming",
        "creative_writing",
        "general_qa",
    } <= cats
    for line in BUNDLED_PATH.read_text().splitlines():
        assert set(json.loads(line)) == set(FIELDS)
    assert len(data.sha256) == 64 and data.bytes == BUNDLED_PATH.stat().st_size


def test_bundled_set_is_reproducible_from_its_composer():
    from agents.training.data.compose import compose

    records = compose()
    assert [json.loads(line) for line in BUNDLED_PATH.read_text().splitlines()] == records


def test_context_goes_after_the_instruction():
    rec = {"instruction": "Who?", "context": "Ada wrote it.", "response": "Ada.", "category": "closed_qa"}
    assert user_message(rec) == "Who?\n\nAda wrote it."
    pc = to_prompt_completion(rec)
    assert pc["prompt"] == [{"role": "user", "content": "Who?\n\nAda wrote it."}]
    assert pc["completion"] == [{"role": "assistant", "content": "Ada."}]
    assert to_messages(rec)[-1]["role"] == "assistant"


def test_reads_dolly_jsonl_from_a_path(tmp_path):
    path = tmp_path / "databricks-dolly-15k.jsonl"
    path.write_text(
        json.dumps({"instruction": "a", "context": "", "response": "b", "category": "open_qa"})
        + "\n"
        + json.dumps({"instruction": "c", "response": "d"})
        + "\n"
    )
    data = load_instructions(path)
    assert len(data) == 2 and data.records[1]["context"] == "" and data.source == str(path)
    assert len(load_instructions(path, limit=1)) == 1


def test_reads_dolly_jsonl_from_s3():
    body = (json.dumps({"instruction": "a", "context": "c", "response": "b", "category": "x"}) + "\n").encode()

    class FakeS3:
        def get_object(self, Bucket, Key):
            assert (Bucket, Key) == ("bkt", "data/dolly.jsonl")
            return {"Body": io.BytesIO(body)}

    data = load_instructions("s3://bkt/data/dolly.jsonl", s3_client=FakeS3())
    assert data.records[0]["context"] == "c" and data.bytes == len(body)


@pytest.mark.parametrize(
    "line,why", [("{not json", "not JSON"), ('{"instruction": "x"}', "response"), ("[1, 2]", "expected an object")]
)
def test_bad_lines_name_the_source_and_line(tmp_path, line, why):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"instruction": "a", "response": "b"}) + "\n" + line + "\n")
    with pytest.raises(DatasetFormatError, match=rf"bad.jsonl:2: .*{why}"):
        load_instructions(path)


def test_sample_cycles_deterministically():
    recs = [{"instruction": str(i), "response": "r"} for i in range(3)]
    assert [r["instruction"] for r in sample(recs, 5)] == ["0", "1", "2", "0", "1"]
