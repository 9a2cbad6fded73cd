"""Lambda workers import only the staged code and the layer, as the Lambda runtime does."""

from __future__ import annotations

from pathlib import Path

import pytest

from rehearsal.lambdas import LambdaFunction, build_layer, layer_distributions, path_is_isolated


@pytest.fixture(scope="module")
def layer(tmp_path_factory):
    return build_layer(tmp_path_factory.mktemp("layer"))


def _function(tmp_path: Path, layer: Path, body: str) -> LambdaFunction:
    code = tmp_path / "code"
    (code / "fn").mkdir(parents=True)
    (code / "fn" / "__init__.py").write_text("")
    (code / "fn" / "main.py").write_text(body)
    return LambdaFunction(
        name="probe",
        arn="arn:aws:lambda:us-west-2:123456789012:function:probe",
        handler="fn.main.handler",
        code_dir=code,
        layer_dir=layer,
        environment={"X": "1"},
        timeout_s=30,
        log_path=tmp_path / "probe.log",
    )


def test_layer_holds_the_requirements_closure_and_the_runtime_packages():
    names = {d.metadata["Name"].lower().replace("_", "-") for d in layer_distributions()}
    assert {"pydantic", "pydantic-core", "aws-lambda-powertools", "duckdb", "pyarrow", "boto3", "botocore"} <= names
    assert not {"rich", "torch", "matplotlib", "moto"} & names


def test_a_handler_importing_outside_the_layer_fails_like_lambda(tmp_path, layer):
    fn = _function(tmp_path, layer, "import rich\n\ndef handler(event, context):\n    return 1\n")
    try:
        result, error = fn.invoke({})
    finally:
        fn.close()
    assert result is None
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert "No module named 'rich'" in error["errorMessage"]
    assert path_is_isolated(fn.init_sys_path, fn.code_dir, layer)


def test_a_handler_using_the_layer_runs_with_its_environment(tmp_path, layer):
    body = (
        "import os, pydantic, boto3\n\ndef handler(event, context):\n"
        "    print('log line')\n"
        "    return {'x': os.environ['X'], 'got': event, 'name': context.function_name}\n"
    )
    fn = _function(tmp_path, layer, body)
    try:
        result, error = fn.invoke({"a": 1})
    finally:
        fn.close()
    assert error is None and result == {"x": "1", "got": {"a": 1}, "name": "probe"}
    assert "log line" in (tmp_path / "probe.log").read_text()
