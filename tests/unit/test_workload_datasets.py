"""agents.loadgen.datasets: every reader on its fixture, S3 through moto, and every bad input."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.loadgen.datasets import Dataset, DatasetError, directory_sha256, read_dataset
from tests.support.errors import one_line_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workloads"
CHAT = FIXTURES / "chat.sharegpt.json"
PROMPTS = FIXTURES / "prompts.jsonl"
PARQUET = FIXTURES / "prompts.parquet"
HF = FIXTURES / "hf_prompts"


def error_of(call: Callable[[], Any]) -> str:
    return one_line_error(DatasetError, call)


def manifest_sha256(root: Path) -> str:
    lines = sorted(
        f"{f.relative_to(root).as_posix()} {hashlib.sha256(f.read_bytes()).hexdigest()}\n"
        for f in root.rglob("*")
        if f.is_file()
    )
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def write(path: Path, text: str | bytes) -> str:
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


# --- the fixtures -------------------------------------------------------------------------------------------


def test_sharegpt_keeps_user_turns_in_order_and_skips_a_conversation_without_one():
    ds = read_dataset(str(CHAT))
    assert ds.kind == "sharegpt" and ds.path == str(CHAT)
    assert len(ds.conversations) == 11 and ds.skipped == 1
    assert ds.conversations[1] == ("Name three bridge designs.", "Which one spans the farthest?", "Why is that?")
    assert ds.conversations[3] == ("Convert 30 miles to kilometres.", "And 30 kilometres to miles?")
    assert ds.conversations[4] == ("Suggest a name for a grey kitten.",)  # from "user"
    assert ds.conversations[5] == ("What rhymes with orange, loosely?",)  # key "conversation"
    assert [len(c) for c in ds.conversations] == [1, 3, 1, 2, 1, 1, 4, 1, 2, 1, 2]
    texts = [t for c in ds.conversations for t in c]
    assert "You are a terse assistant." not in texts and "Suspension." not in texts
    assert ds.prompts[:3] == [
        "How do I water a cactus in winter?",
        "Name three bridge designs.",
        "Write a haiku about a lost umbrella.",
    ]


def test_jsonl_reads_prompts_and_messages():
    ds = read_dataset(str(PROMPTS))
    assert ds.kind == "jsonl" and len(ds.conversations) == 20 and ds.skipped == 0
    assert ds.prompts[0] == "Describe the smell of rain on a hot street."
    assert ds.conversations[12] == ("Pick a number between one and ten.", "Why seven?")
    assert ds.conversations[13] == ("What time is it?",)  # the system message dropped
    assert ds.conversations[14] == ("Read this label:\nKeep frozen.",)  # content parts joined
    assert ds.conversations[15] == ("Tell me a fact about owls.",)  # an assistant with null content ignored
    assert ds.prompts[-1] == "Give three tips for packing a small suitcase."


def test_parquet_reads_nested_sharegpt_rows():
    ds = read_dataset(str(PARQUET))
    assert ds.kind == "parquet" and len(ds.conversations) == 5 and ds.skipped == 1
    assert ds.conversations[0] == ("What is a good first programming language?", "And a second one?")
    assert ds.conversations[2] == ("What is an anagram of 'listen'?",)
    assert ds.conversations[3] == ("Name a tree that keeps its leaves all year.", "Another one?", "One more, please.")


def test_hf_directory_reads_messages_column():
    ds = read_dataset(str(HF))
    assert ds.kind == "hf" and ds.split is None and len(ds.conversations) == 5
    assert ds.conversations[0] == ("Suggest a board game for two players.", "Something quicker?")
    assert ds.conversations[2] == ("Opposite of tall?",)
    assert ds.conversations[3] == ("Invent a new sandwich.", "Add something crunchy.", "Name it.")


def test_hf_fallback_reads_arrow_files_without_datasets(monkeypatch: pytest.MonkeyPatch):
    with_datasets = read_dataset(str(HF))
    monkeypatch.setitem(sys.modules, "datasets", None)  # ``import datasets`` now raises ImportError
    without = read_dataset(str(HF))
    assert without == with_datasets


def test_hashes_are_of_the_bytes_read_and_stable():
    for path in (CHAT, PROMPTS, PARQUET):
        ds = read_dataset(str(path))
        assert ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert read_dataset(str(path)).sha256 == ds.sha256
    assert read_dataset(str(HF)).sha256 == manifest_sha256(HF) == directory_sha256(HF)
    assert len({read_dataset(str(p)).sha256 for p in (CHAT, PROMPTS, PARQUET, HF)}) == 4


def test_explicit_kinds_matching_the_file_are_accepted():
    assert read_dataset(str(CHAT), "sharegpt").conversations == read_dataset(str(CHAT)).conversations
    assert read_dataset(str(PARQUET), "parquet").kind == "parquet"
    assert read_dataset(str(HF), "hf").kind == "hf"


def test_jsonl_accepts_sharegpt_shaped_lines(tmp_path: Path):
    lines = [json.dumps(r) for r in json.loads(CHAT.read_text())]
    ds = read_dataset(write(tmp_path / "chat.jsonl", "\n".join(lines) + "\n\n"))
    assert ds.conversations == read_dataset(str(CHAT)).conversations and ds.skipped == 1


def test_min_turns_met():
    assert len(read_dataset(str(CHAT), min_turns=3, min_conversations=2).conversations) == 11


# --- HF DatasetDict splits ---------------------------------------------------------------------------------


def save_dict(path: Path, **splits: list[str]) -> str:
    import datasets

    datasets.DatasetDict(
        {name: datasets.Dataset.from_dict({"prompt": prompts}) for name, prompts in splits.items()}
    ).save_to_disk(str(path))
    return str(path)


def test_dataset_dict_splits(tmp_path: Path):
    both = save_dict(tmp_path / "both", train=["a train prompt", "another"], test=["a test prompt"])
    ds = read_dataset(both)
    assert ds.split == "train" and ds.prompts == ["a train prompt", "another"]
    assert ds.sha256 == manifest_sha256(Path(both))
    assert read_dataset(both, split="test").prompts == ["a test prompt"]
    only = save_dict(tmp_path / "only", validation=["the only split"])
    assert read_dataset(only).split == "validation"
    two = save_dict(tmp_path / "two", dev=["x"], test=["y"])
    assert error_of(lambda: read_dataset(two)) == (
        f"{two}: several splits and none named train; pass split= one of dev, test"
    )
    assert error_of(lambda: read_dataset(both, split="dev")) == f"{both}: no split 'dev'; splits: train, test"


def test_split_needs_a_dataset_dict():
    assert "single dataset, not a DatasetDict" in error_of(lambda: read_dataset(str(HF), split="train"))
    assert "only kind hf" in error_of(lambda: read_dataset(str(PROMPTS), split="train"))


# --- S3 through moto ---------------------------------------------------------------------------------------


@pytest.fixture
def s3():
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket="prompts", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        client.upload_file(str(CHAT), "prompts", "sets/chat.sharegpt.json")
        for f in HF.rglob("*"):
            if f.is_file():
                client.upload_file(str(f), "prompts", f"sets/hf_prompts/{f.relative_to(HF).as_posix()}")
        yield client


def test_s3_file_is_downloaded_and_read(s3: Any, tmp_path: Path):
    uri = "s3://prompts/sets/chat.sharegpt.json"
    ds = read_dataset(uri, s3_client=s3, download_dir=tmp_path)
    local = read_dataset(str(CHAT))
    assert ds == Dataset(uri, "sharegpt", local.sha256, local.conversations, local.skipped)
    assert (tmp_path / "chat.sharegpt.json").read_bytes() == CHAT.read_bytes()


def test_s3_without_download_dir_uses_a_temporary_one(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ds = read_dataset("s3://prompts/sets/chat.sharegpt.json", s3_client=s3)
    assert len(ds.conversations) == 11
    assert list(tmp_path.iterdir()) == []  # removed after reading


def test_s3_hf_prefix_downloads_every_object(s3: Any, tmp_path: Path):
    ds = read_dataset("s3://prompts/sets/hf_prompts/", s3_client=s3, download_dir=tmp_path)
    assert ds.kind == "hf" and ds.sha256 == read_dataset(str(HF)).sha256
    assert ds.conversations == read_dataset(str(HF)).conversations


def test_s3_errors(s3: Any, tmp_path: Path):
    missing = error_of(lambda: read_dataset("s3://prompts/sets/nope.json", s3_client=s3, download_dir=tmp_path))
    assert missing.startswith("s3://prompts/sets/nope.json: cannot download: ") and "Not Found" in missing
    dir_hint = error_of(lambda: read_dataset("s3://prompts/sets/hf_prompts", s3_client=s3, download_dir=tmp_path))
    assert "end the URI with / to read a directory" in dir_hint
    assert error_of(lambda: read_dataset("s3://prompts/empty/", s3_client=s3, download_dir=tmp_path)) == (
        "s3://prompts/empty/: no objects under this prefix"
    )
    no_bucket = error_of(lambda: read_dataset("s3://absent-bucket/x/", s3_client=s3, download_dir=tmp_path))
    assert no_bucket.startswith("s3://absent-bucket/x/: cannot download: ") and "NoSuchBucket" in no_bucket
    assert "expected s3://bucket/key" in error_of(lambda: read_dataset("s3://prompts", s3_client=s3))


# --- bad inputs ---------------------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path):
    path = str(tmp_path / "absent.jsonl")
    assert error_of(lambda: read_dataset(path)) == f"{path}: no such file or directory"


def test_not_utf8_names_the_line(tmp_path: Path):
    jsonl = write(tmp_path / "bad.jsonl", b'{"prompt": "fine"}\n{"prompt": "also fine"}\n{"prompt": "\xff"}\n')
    assert error_of(lambda: read_dataset(jsonl)).startswith(f"{jsonl}:3: not UTF-8")
    js = write(tmp_path / "bad.json", b'[\n{"prompt": "\xc3("}\n]\n')
    assert error_of(lambda: read_dataset(js)).startswith(f"{js}:2: not UTF-8")


def test_invalid_json_names_the_line_and_the_error(tmp_path: Path):
    jsonl = write(tmp_path / "bad.jsonl", '{"prompt": "ok"}\n{"prompt": "unterminated}\n')
    assert error_of(lambda: read_dataset(jsonl)).startswith(f"{jsonl}:2: invalid JSON: Unterminated string")
    js = write(tmp_path / "bad.json", '[\n{"prompt": "a"},\n{"prompt": "b",}\n]')
    assert error_of(lambda: read_dataset(js)).startswith(f"{js}:3: invalid JSON: ")


def test_empty_inputs(tmp_path: Path):
    for name in ("empty.jsonl", "empty.json"):
        path = write(tmp_path / name, "\n  \n")
        assert error_of(lambda: read_dataset(path)) == f"{path}: the file is empty"  # noqa: B023 - called within this iteration
    empty_list = write(tmp_path / "list.json", "[]")
    assert error_of(lambda: read_dataset(empty_list)) == f"{empty_list}: the JSON list is empty"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    path = str(tmp_path / "empty.parquet")
    assert error_of(lambda: read_dataset(path)) == f"{path}: the Parquet file has no rows"


def test_unknown_shape_names_the_fields_found_and_expected(tmp_path: Path):
    path = write(tmp_path / "data.jsonl", '{"prompt": "a"}\n{"text": "b"}\n{"foo": 1, "bar": 2}\n')
    assert error_of(lambda: read_dataset(path)) == (
        f"{path}:3: no prompt, text, messages or conversations field (found: foo, bar)"
    )


def test_non_string_fields_name_the_record(tmp_path: Path):
    path = write(tmp_path / "data.jsonl", '{"prompt": 42}\n')
    assert error_of(lambda: read_dataset(path)) == f"{path}:1: prompt is a number, expected a string"
    path = write(
        tmp_path / "chat.json",
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": "hi"}]},
                {"conversations": [{"from": "human", "value": ["x"]}]},
            ]
        ),
    )
    assert error_of(lambda: read_dataset(path)) == (
        f"{path}:record 1: conversations[0].value is a list, expected a string"
    )
    path = write(tmp_path / "msg.jsonl", '{"messages": [{"role": "user", "content": null}]}\n')
    assert error_of(lambda: read_dataset(path)) == f"{path}:1: messages[0].content is null, expected a string"
    path = write(tmp_path / "role.jsonl", '{"messages": [{"role": "customer", "content": "hi"}]}\n')
    assert error_of(lambda: read_dataset(path)).startswith(f"{path}:1: messages[0].role is 'customer'; expected one of")
    path = write(tmp_path / "list.jsonl", '{"messages": "hello"}\n')
    assert error_of(lambda: read_dataset(path)) == f"{path}:1: messages is a string, expected a list of messages"


def test_parquet_rows_are_named(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"], "question": ["q1", "q2"]}), tmp_path / "odd.parquet")
    path = str(tmp_path / "odd.parquet")
    assert error_of(lambda: read_dataset(path)) == (
        f"{path}:row 0: no prompt, text, messages or conversations field (found: id, question)"
    )


def test_too_few_conversations_says_how_many_and_why():
    assert error_of(lambda: read_dataset(str(CHAT), min_conversations=12)) == (
        f"{CHAT}: 11 usable conversations, 12 needed (1 skipped: 1 no user message)"
    )


def test_too_few_deep_conversations():
    assert error_of(lambda: read_dataset(str(CHAT), min_turns=3, min_conversations=3)) == (
        f"{CHAT}: 2 conversations have at least 3 user turns, 3 needed"
    )
    assert error_of(lambda: read_dataset(str(PROMPTS), min_turns=3)) == (
        f"{PROMPTS}: 0 conversations have at least 3 user turns, 1 needed"
    )


def test_kind_that_does_not_match_the_file(tmp_path: Path):
    assert "one JSON object per line is kind jsonl" in error_of(lambda: read_dataset(str(PROMPTS), "sharegpt"))
    assert "kind sharegpt" in error_of(lambda: read_dataset(str(CHAT), "jsonl"))
    assert error_of(lambda: read_dataset(str(PARQUET), "jsonl")) == (
        f"{PARQUET}: kind jsonl given, but this is a Parquet file (kind parquet)"
    )
    assert "Parquet magic" in error_of(lambda: read_dataset(str(PROMPTS), "parquet"))
    assert error_of(lambda: read_dataset(str(PROMPTS), "hf")) == (
        f"{PROMPTS}: kind hf needs a save_to_disk directory, this is a file"
    )
    assert "this is an HF save_to_disk directory" in error_of(lambda: read_dataset(str(HF), "jsonl"))
    assert error_of(lambda: read_dataset(str(CHAT), "csv")) == (
        f"{CHAT}: unknown kind 'csv'; valid kinds: sharegpt, jsonl, parquet, hf"
    )
    obj = write(tmp_path / "obj.json", '{"conversations": []}')
    assert error_of(lambda: read_dataset(obj)) == f"{obj}: expected a JSON list of ShareGPT records, got an object"


def test_uninferable_inputs(tmp_path: Path):
    txt = write(tmp_path / "prompts.txt", "hello\n")
    assert "cannot infer the kind from the extension '.txt'" in error_of(lambda: read_dataset(txt))
    assert read_dataset(write(tmp_path / "p.data", '{"prompt": "hi"}\n'), "jsonl").prompts == ["hi"]
    (tmp_path / "plain").mkdir()
    assert "not an HF save_to_disk directory" in error_of(lambda: read_dataset(str(tmp_path / "plain")))


def test_bad_arguments():
    assert error_of(lambda: read_dataset(str(CHAT), min_turns=0)) == (
        f"{CHAT}: min_turns must be an integer >= 1, got 0"
    )
    assert "min_conversations must be" in error_of(lambda: read_dataset(str(CHAT), min_conversations=-1))
