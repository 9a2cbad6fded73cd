"""pipeline.jsonio: the one JSON reader refuses what would push the project around, in one line with where."""

from __future__ import annotations

import json
import os
import socket

import pytest

from pipeline.jsonio import DEFAULT_MAX_DEPTH, JsonInputError, loads, read_bytes, read_json


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '{"lane_config": {"serve_sweep": {"repeats": 1,\n  "repeats": 2}}}',
            'duplicate key "repeats" at $.lane_config.serve_sweep.repeats (line 2, column 3)',
        ),
        (
            '{"a": [1, 2, ' + "9" * 6000 + "]}",
            "number literal of 6,000 characters (at most 100) at $.a[2] (line 1, column 14)",
        ),
        ('{"a": -' + "1" * 101 + ".5}", "number literal of 104 characters"),
        ('{"a": NaN}', "NaN is not allowed (not a number) at $.a (line 1, column 7)"),
        ('{"a": [Infinity]}', "Infinity is not allowed (not a number) at $.a[0]"),
        ('{"a": -Infinity}', "-Infinity is not allowed"),
        ('{"a": 1e999}', "number 1e999 overflows a float at $.a"),
        ('{"a" 1}', "not JSON: Expecting ':' delimiter at $.a (line 1, column 6)"),
        ("", "not JSON: Expecting value at $ (line 1, column 1)"),
        ('{"x": "open [[[[', "not JSON: Unterminated string starting at $.x (line 1, column 7)"),
        ('{"odd key": {"k": [0, 1, {"k": 2, "k": 3}]}}', 'duplicate key "k" at $["odd key"].k[2].k'),
        ("[" * 5000 + "]" * 5000, f"nested deeper than {DEFAULT_MAX_DEPTH} levels at $[0][0]"),
        ('{"a":' * 3000 + "1" + "}" * 3000, "levels)…"),  # a deep path is shortened, the message stays one line
    ],
)
def test_a_refusal_is_one_line_naming_the_problem_and_where(text, expected):
    with pytest.raises(JsonInputError) as err:
        loads(text)
    message = str(err.value)
    assert expected in message and "\n" not in message and len(message) < 300


def test_brackets_inside_strings_do_not_count_as_nesting_and_valid_json_parses_as_json_does():
    doc = {"a": "[[[[" * 40 + '"{{{', "b": [[[]]], "n": [0, -1, 2.5e-3, 12345678901234567890], "s": "é\u2028"}
    text = json.dumps(doc)
    assert loads(text) == json.loads(text) == doc
    assert loads(text.encode()) == doc


def test_nan_and_infinity_are_allowed_when_the_caller_says_so():
    value = loads('{"a": NaN, "b": Infinity, "c": 1e999}', allow_nan=True)
    assert value["a"] != value["a"] and value["b"] == value["c"] == float("inf")


def test_the_limits_are_the_callers():
    assert loads("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(JsonInputError, match="deeper than 2 levels at \\$\\[0\\]"):
        loads("[[[1]]]", max_depth=2)
    with pytest.raises(JsonInputError, match="number literal of 4 characters \\(at most 3\\)"):
        loads("[1234]", max_number_chars=3)


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b'{"a": "caf\xe9"}', "not UTF-8 text (byte 10: invalid continuation byte) at $.a (line 1, column 11)"),
        (b'{"k": [1,\n 2, "\xff"]}', "at $.k[2] (line 2, column 6)"),
        (b"\xef\xbb\xbf{}", "Unexpected UTF-8 BOM"),
    ],
)
def test_bytes_must_be_utf8(raw, expected):
    with pytest.raises(JsonInputError) as err:
        loads(raw, source="x.json")
    assert str(err.value).startswith("x.json: ") and expected in str(err.value)


def test_only_a_regular_file_within_the_cap_is_read(tmp_path):
    ok = tmp_path / "ok.json"
    ok.write_text('{"a": 1}')
    assert read_json(ok) == {"a": 1}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: never opened
    sock_path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        for path, kind in (
            (tmp_path, "a directory"),
            (fifo, "a named pipe (FIFO)"),
            ("/dev/zero", "a character device"),
            (sock_path, "a socket"),
        ):
            with pytest.raises(
                JsonInputError,
                match=f"cannot read {path}: it is {kind.replace('(', '.').replace(')', '.')}, not a regular file",
            ):
                read_bytes(path)
    finally:
        sock.close()
    with pytest.raises(JsonInputError, match="cannot read .*missing.json: No such file or directory"):
        read_json(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 500 + "1]")
    with pytest.raises(JsonInputError, match=r"big.json is 1,003 bytes, over the cap of 100 bytes \(a request\)$"):
        read_json(big, max_bytes=100, why="a request")
    assert len(read_bytes(big, max_bytes=1003)) == 1003


def test_a_file_refusal_names_the_file(tmp_path):
    dup = tmp_path / "dup.json"
    dup.write_text('{"a": 1, "a": 2}')
    with pytest.raises(JsonInputError, match=f'^{dup}: duplicate key "a" at \\$.a \\(line 1, column 10\\)$'):
        read_json(dup)
