import pyarrow as pa
import pytest

from analytics.schema import (
    KEY_COLUMNS,
    SCHEMA_VERSION,
    TABLES,
    SchemaMismatchError,
    UnknownTableError,
    conform,
    empty_table,
)

EXPECTED = {
    "requests",
    "sweep_points",
    "sustained_windows",
    "train_steps",
    "train_runs",
    "compiles",
    "telemetry",
    "provenance",
    "host_bench",
    "artifacts",
    "quality",
    "lane_runs",
}


def test_every_contract_table_exists_and_is_keyed():
    assert EXPECTED <= set(TABLES)
    assert SCHEMA_VERSION == 1
    for name, schema in TABLES.items():
        assert schema.names[:3] == list(KEY_COLUMNS), name
        assert empty_table(name).num_rows == 0


def test_lane_runs_has_the_required_columns():
    names = set(TABLES["lane_runs"].names)
    assert {
        "run_id",
        "lane",
        "attempt",
        "status",
        "started_at",
        "ended_at",
        "error_type",
        "error_message",
        "backend",
        "host",
    } <= names


def test_conform_fills_keys_and_nulls():
    t = conform(
        "host_bench",
        [{"bench": "triad", "value": 1.0, "unit": "GB/s"}],
        defaults={"run_id": "r", "lane": "l", "attempt": "a"},
    )
    assert t.schema == TABLES["host_bench"]
    row = t.to_pylist()[0]
    assert row["run_id"] == "r" and row["threads"] is None and row["value"] == 1.0


def test_bad_type_names_table_and_column():
    with pytest.raises(SchemaMismatchError) as err:
        conform(
            "host_bench",
            [{"bench": "triad", "value": "fast", "unit": "GB/s"}],
            defaults={"run_id": "r", "lane": "l", "attempt": "a"},
        )
    assert err.value.table == "host_bench" and err.value.column == "value"
    assert "'host_bench'" in str(err.value) and "'value'" in str(err.value)


def test_unknown_column_names_table_and_column():
    with pytest.raises(SchemaMismatchError) as err:
        conform("telemetry", [{"metric": "x", "source": "host", "wat": 1}], defaults={})
    assert err.value.column == "wat"


def test_missing_required_column_is_named():
    with pytest.raises(SchemaMismatchError) as err:
        conform("host_bench", [{"bench": "triad", "value": 1.0}], defaults={"run_id": "r", "lane": "l", "attempt": "a"})
    assert err.value.column == "unit"


def test_arrow_input_is_cast_and_checked():
    batch = pa.table(
        {
            "run_id": ["r"],
            "lane": ["l"],
            "attempt": ["a"],
            "bench": ["matmul"],
            "unit": ["GFLOP/s"],
            "value": pa.array([3], type=pa.int64()),
        }
    )
    t = conform("host_bench", batch)
    assert t.column("value").type == pa.float64()


def test_unknown_table_lists_valid_ones():
    with pytest.raises(UnknownTableError, match="valid tables: .*lane_runs"):
        conform("nope", [])
