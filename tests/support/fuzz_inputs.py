"""Hypothesis strategies for malformed input: requests and lane configs, JSON files, vLLM result files, SQL.

Used by ``tests/functional/test_fuzz_inputs.py``. A JSON file is a generated document after one mutation of
its raw text (truncated, a key repeated, nested thousands deep, a 6,000-digit number, NaN, bytes that are not
UTF-8, a BOM, UTF-16, garbage); SQL is one to three statements drawn from writes, reads of files outside the
store and plain reads, with ``{placeholders}`` for the test's paths.
"""

from __future__ import annotations

import dataclasses
import importlib
import json

from hypothesis import strategies as st

from pipeline.lanes import lane_names

VLLM_KEYS = {
    "model_id": "m",
    "num_prompts": 4,
    "request_rate": "inf",
    "duration": 2.0,
    "completed": 4,
    "total_input_tokens": 64,
    "total_output_tokens": 32,
    "request_throughput": 2.0,
    "output_throughput": 16.0,
    "mean_ttft_ms": 10.0,
    "p99_ttft_ms": float("nan"),
}


def _lane_fields() -> dict[str, list[str]]:
    """Each lane's Config field names (pipeline.lane_configs): the keys a lane_config may hold."""
    out = {}
    for lane in lane_names():
        try:
            config = importlib.import_module(f"pipeline.lane_configs.{lane}").Config
        except (ModuleNotFoundError, AttributeError):
            continue
        out[lane] = [f.name for f in dataclasses.fields(config)]
    return out


LANE_FIELDS = _lane_fields()
LANES = sorted(LANE_FIELDS)
FIELDS = sorted({f for fs in LANE_FIELDS.values() for f in fs}) + ["bogus_field", "", "slo"]


# ---- requests and lane configs ------------------------------------------------------------------------
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["128:128", "A", "p99", "tiny", "full", "-1", "1e9"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
LANE_CONFIG = st.dictionaries(
    st.sampled_from(LANES + ["nope", ""]),
    st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=4) | VALUES,
    max_size=3,
)
# ---- workloads: each numeric field, within its bounds or hostile (every HOSTILE number is beyond every bound a
# workload field has: the largest is a seed's 2**32 - 1; the lowest any field takes is 0) --------------------------
HOSTILE = (10**15, 2**64, 1e300, 1e308, -1e308, -(10**15))
# (path of fields, a valid value) for every numeric field of a workload, in a spec where the field is read
WORKLOAD_NUMBERS = (
    (("input",), 64),
    (("output", "high"), 48),
    (("input", "mean"), 48),
    (("input", "stdev"), 16),
    (("input", "values", 0), 40),
    (("input", "weights", 0), 2.0),
    (("turns",), 3),
    (("think_time_s",), 0.5),
    (("prefix", "tokens"), 8),
    (("prefix", "groups"), 2),
    (("seed",), 7),
    (("arrival", "concurrency", 0), 2),
    (("arrival", "rate"), 2.0),
    (("arrival", "burstiness"), 1.5),
    (("arrival", "duration_s"), 5.0),
    (("arrival", "time_scale"), 0.5),
    (("arrival", "limit"), 10),
    (("arrival", "block_tokens"), 16),
    (("arrival", "from_rate"), 1.0),
    (("arrival", "to_rate"), 4.0),
    (("arrival", "over_s"), 5.0),
    (("arrival", "from_concurrency"), 1),
    (("arrival", "to_concurrency"), 4),
)


def _workload_holding(path: tuple) -> dict:
    """A valid workload in which the field at ``path`` is read."""
    head = path[0]
    if head == "input" and len(path) > 1 and path[1] in ("mean", "stdev"):
        return {"input": {"dist": "normal", "mean": 48, "stdev": 16, "low": 8, "high": 160}, "output": 16}
    if head == "input" and len(path) > 1:
        return {"input": {"dist": "empirical", "values": [40, 80], "weights": [1.0, 2.0]}, "output": 16}
    if head == "output":
        return {"input": 32, "output": {"dist": "uniform", "low": 16, "high": 48}}
    if head in ("turns", "think_time_s"):
        return {"input": 24, "output": 16, "turns": 3, "think_time_s": 0.5}
    if head == "prefix":
        return {"input": 96, "output": 16, "prefix": {"tokens": 8, "groups": 2}}
    if head == "arrival":
        kind = {
            "concurrency": "closed",
            "rate": "gamma",
            "burstiness": "gamma",
            "duration_s": "gamma",
            "time_scale": "trace",
            "limit": "trace",
            "block_tokens": "trace",
        }.get(path[1], "ramp")
        arrival = {
            "closed": {"kind": "closed", "concurrency": [2]},
            "gamma": {"kind": "gamma", "rate": 2.0, "burstiness": 1.5, "duration_s": 5.0},
            "trace": {"kind": "trace", "path": "{trace}", "time_scale": 0.5, "limit": 10, "block_tokens": 16},
            "ramp": (
                {"kind": "ramp", "from_concurrency": 1, "to_concurrency": 4, "over_s": 5.0}
                if "concurrency" in path[1]
                else {"kind": "ramp", "from_rate": 1.0, "to_rate": 4.0, "over_s": 5.0}
            ),
        }[kind]
        return {"input": 32, "output": 16, "arrival": arrival}
    return {"input": 64, "output": 16, "seed": 7}


def _set(doc: dict, path: tuple, value) -> dict:
    at = doc
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return doc


@st.composite
def workload_numbers(draw) -> tuple[dict, str, bool]:
    """(a workload, the dotted field drawn, whether its value is hostile): the field set to its valid value, a
    value from HOSTILE, or a number drawn anywhere (huge, negative, fractional)."""
    path, ok = draw(st.sampled_from(WORKLOAD_NUMBERS))
    doc = _workload_holding(path)
    how = draw(st.sampled_from(["ok", "hostile", "hostile", "drawn"]))
    value = (
        ok
        if how == "ok"
        else draw(st.sampled_from(HOSTILE))
        if how == "hostile"
        else draw(st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False, width=64))
    )
    hostile = how == "hostile" or (how == "drawn" and (value < 0 or abs(value) >= 10**15))
    return _set(doc, path, value), ".".join(str(p) for p in path if not isinstance(p, int)), hostile


WORKLOADS = st.dictionaries(
    st.sampled_from(["w", "lengths", "A", "bad name", ""]),
    st.builds(lambda t: t[0], workload_numbers()) | VALUES,
    max_size=2,
)
# run ids: the control plane's rule (1-80 ASCII letters, digits, '-', '_', a letter or digit first) at its edges
RUN_IDS = st.sampled_from(
    ["ok-1", "a" * 80, "a" * 81, "caf\u00e9", "r\u0663", "x.y", "-x", "_x", "a_b-c", "A1"]
) | st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=90)

REQUEST = st.fixed_dictionaries(
    {},
    optional={
        "lanes": st.lists(st.sampled_from(LANES + ["nope"]), max_size=3) | VALUES,
        "preset": st.sampled_from(["smoke", "full", "nope"]) | VALUES,
        "profile": st.sampled_from(["tiny", "full", "huge"]) | VALUES,
        "lane_config": LANE_CONFIG | VALUES,
        "max_cost_usd": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70) | VALUES,
        "slo": st.sampled_from(["interactive", "batch", "nope"]) | VALUES,
        "run_id": st.sampled_from(["ok-1", "a/b", "", "x" * 90]) | RUN_IDS | VALUES,
        "force": VALUES,
        "models": VALUES,
        "server_configs": VALUES,
        "trigger": VALUES,
        "workloads": WORKLOADS,
    },
)
MUTATIONS = (
    "as_is",
    "truncate",
    "duplicate_top",
    "duplicate_nested",
    "deep",
    "deep_nested",
    "huge_int",
    "huge_float",
    "nan",
    "non_utf8",
    "bom",
    "empty",
    "garbage",
    "trailing",
    "utf16",
)


@st.composite
def json_files(draw, base=REQUEST) -> bytes:
    """A JSON document from ``base``, as bytes after one mutation of its raw text."""
    doc = draw(base)
    text = json.dumps(doc)
    how = draw(st.sampled_from(MUTATIONS))
    if how == "truncate" and text:
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif how == "duplicate_top":
        key = draw(st.sampled_from(sorted(doc) or ["lanes"]))
        text = (
            "{" + json.dumps(key) + ": 1, " + text[1:]
            if text.startswith("{") and text != "{}"
            else "{" + json.dumps(key) + ": 1, " + json.dumps(key) + ": 2}"
        )
    elif how == "duplicate_nested":
        lane, field = draw(st.sampled_from(LANES)), draw(st.sampled_from(FIELDS))
        text = (
            f'{{"lanes": [{json.dumps(lane)}], "lane_config": {{{json.dumps(lane)}: '
            f"{{{json.dumps(field)}: 1, {json.dumps(field)}: 2}}}}}}"
        )
    elif how in ("deep", "deep_nested"):
        depth = draw(st.sampled_from([65, 200, 3000, 20000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        deep = opener * depth + "1" + closer * depth
        text = deep if how == "deep" else f'{{"lane_config": {{"smoke": {{"model": {deep}}}}}}}'
    elif how in ("huge_int", "huge_float", "nan"):
        literal = {
            "huge_int": "9" * draw(st.sampled_from([101, 4301, 6000, 50000])),
            "huge_float": "1." + "5" * draw(st.sampled_from([200, 6000])) + "e" + draw(st.sampled_from(["5", "999"])),
            "nan": draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"])),
        }[how]
        lane, field = draw(st.sampled_from(LANES)), draw(st.sampled_from(FIELDS))
        lane_config = f"{{{json.dumps(lane)}: {{{json.dumps(field)}: {literal}}}}}"
        text = f'{{"lanes": [{json.dumps(lane)}], "lane_config": {lane_config}}}'
    elif how == "empty":
        text = ""
    elif how == "trailing":
        text = text + draw(st.sampled_from([" x", "{}", ",", "\x00"]))
    raw = text.encode("utf-8", "surrogatepass")
    if how == "non_utf8":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe9", b"\xed\xa0\x80"])) + raw[at:]
    elif how == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif how == "garbage":
        raw = draw(st.binary(max_size=200))
    elif how == "utf16":
        raw = text.encode("utf-16")
    return raw


VLLM = st.fixed_dictionaries(
    {k: st.just(v) | VALUES for k, v in VLLM_KEYS.items()},
    optional={
        "ttfts": st.lists(st.floats(allow_nan=True), max_size=4) | VALUES,
        "itls": VALUES,
        "date": st.sampled_from(["20260701-120000", "x"]) | VALUES,
    },
)


# ---- SQL ------------------------------------------------------------------------------------------------------
WRITES = (
    "COPY (SELECT 1) TO '{p}'",
    "COPY host_bench TO '{p}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY host_bench FROM '{p}'",
    "ATTACH '{p}' AS fz",
    "DETACH fz",
    "INSTALL httpfs",
    "LOAD '{p}'",
    "CREATE TABLE t AS SELECT 1",
    "CREATE OR REPLACE VIEW host_bench AS SELECT 1",
    "INSERT INTO store_exclusions SELECT * FROM store_exclusions",
    "UPDATE store_exclusions SET reason = 'x'",
    "DELETE FROM store_exclusions",
    "DROP VIEW host_bench",
    "ALTER VIEW host_bench RENAME TO y",
    "EXPORT DATABASE '{p}'",
    "IMPORT DATABASE '{p}'",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "SET temp_directory = '{p}'",
    "PRAGMA enable_profiling",
    "PRAGMA memory_limit = '1GB'",
    "CALL pragma_version()",
    "BEGIN",
    "CHECKPOINT",
    "VACUUM",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{p}'",
    "USE memory",
    "CREATE SECRET (TYPE s3)",
    "CREATE MACRO m() AS 1",
    "SET VARIABLE v = 1",
    "UPDATE EXTENSIONS",
    "/* c */ copy (select 1) to '{p}'",
    "-- c\n  CoPy (SELECT 1) TO '{p}'",
    "PIVOT host_bench ON bench",
)
READS_OUTSIDE = (
    "SELECT * FROM read_text('{p}')",
    "SELECT * FROM read_csv('{p}')",
    "SELECT * FROM read_blob('{p}')",
    "SELECT * FROM glob('{p}')",
    "SELECT * FROM read_json('{p}')",
    "FROM '{p}'",
    "SELECT * FROM query('SELECT * FROM read_text(''{p}'')')",
)
READS = (
    "SELECT count(*) FROM host_bench",
    "SELECT 1 AS one",
    "PRAGMA show_tables",
    "DESCRIBE host_bench",
    "EXPLAIN SELECT * FROM host_bench",
    "FROM lane_runs SELECT status",
    "SELECT * FROM store_exclusions",
    "WITH a AS (SELECT 2) SELECT * FROM a",
    "SELECT error('boom')",
    "SELECT cast('x' AS INT)",
)


SQL_PATHS = (
    "{secret}",
    "{results}/v1/x.csv",
    "{results}/fz.duckdb",
    "{results}",
    "{parquet}",
    "{marker}",
    "/etc/passwd",
    "{results}/v1/**/*.parquet",
    "{root}/out.parquet",
    "{fifo}",
)


@st.composite
def sql_cases(draw) -> tuple[str, str]:
    """(SQL with {placeholders} for the world's paths, what it holds: "write", "outside" or "read")."""
    kinds = draw(st.lists(st.sampled_from(["write", "outside", "read", "read"]), min_size=1, max_size=3))
    parts = []
    for kind in kinds:
        template = draw(st.sampled_from({"write": WRITES, "outside": READS_OUTSIDE, "read": READS}[kind]))
        parts.append(template.replace("{p}", draw(st.sampled_from(SQL_PATHS))))
    sql = draw(st.sampled_from(["; ", ";\n", " ;; "])).join(parts)
    holds = "write" if "write" in kinds else "outside" if "outside" in kinds else "read"
    return sql, holds
