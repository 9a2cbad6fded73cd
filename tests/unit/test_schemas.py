"""The published JSON Schemas (docs/reference/schemas/) are what the models generate, `neuronpipe schema` prints them,
and they hold for what the project reads and writes: every example request passes the request's schema and a
misspelled field fails it; a comparison.json with every section passes the comparison's schema, one missing a
section fails it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from control_plane.cli import main
from control_plane.schemas import OUTPUT_DIR, REGENERATE, SCHEMAS, UnknownSchemaError, get_schema
from tests.support.comparison import empty_sections

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_checked_in_schema_is_what_the_model_generates(name):
    schema = SCHEMAS[name]
    path = ROOT / OUTPUT_DIR / schema.file
    assert path.is_file(), f"{path} is missing: run `{REGENERATE}` and commit the result"
    assert path.read_text() == schema.text(), f"{path} is stale: run `{REGENERATE}` and commit the result"
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_neuronpipe_schema_prints_the_published_file(name, capsys):
    assert main(["schema", name]) == 0
    assert capsys.readouterr().out == (ROOT / OUTPUT_DIR / SCHEMAS[name].file).read_text()


def test_an_unknown_schema_names_the_published_ones(capsys):
    with pytest.raises(UnknownSchemaError, match="valid: request, comparison"):
        get_schema("plan")
    with pytest.raises(SystemExit):
        main(["schema", "plan"])
    assert "invalid choice: 'plan'" in capsys.readouterr().err


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((ROOT / OUTPUT_DIR / SCHEMAS[name].file).read_text()))


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("run-*.json")), ids=lambda p: p.name)
def test_every_example_request_passes_the_request_schema(example):
    assert list(_validator("request").iter_errors(json.loads(example.read_text()))) == []


def test_the_request_schema_refuses_what_the_model_refuses_by_shape():
    validator = _validator("request")
    for bad, where in (
        ({"preset": "smoke", "modles": ["qwen3-8b"]}, "modles"),
        ({"preset": "nightly"}, "nightly"),
        ({"run_id": "has a space"}, "has a space"),
        ({"max_cost_usd": 0}, "0"),
    ):
        errors = list(validator.iter_errors(bad))
        assert errors and where in " ".join(e.message for e in errors), (bad, [e.message for e in errors])


def test_a_hand_built_comparison_passes_the_comparison_schema_and_one_missing_a_section_does_not():
    """(the report's own comparison.json is checked against it in tests/functional/test_report_html.py)"""
    validator = _validator("comparison")
    document = empty_sections()
    assert list(validator.iter_errors(document)) == []
    assert document["schema"] == validator.schema["properties"]["schema"]["const"]
    del document["serving"]
    assert [e.message for e in validator.iter_errors(document)] == ["'serving' is a required property"]
