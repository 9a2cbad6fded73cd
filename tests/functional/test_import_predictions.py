"""The predecessor's §13.9 predicted-vs-observed table (REPORT-EXTENSIONS.md) imported as the run's registered
predictions with the verdicts it recorded: its 15 items and 12 of 15 held come back from the view; a table whose
marks do not add up to the count it states is refused in one line, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analytics.importers import tnx_predictions
from analytics.importers.common import ImportInputError
from analytics.importers.source import open_tree
from analytics.store import LocalStore
from analytics.views import connect, view_files_through
from tests.support.views import q

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torchneuronx"
MIRROR = Path("/work/.mirror/alpharomercoma+torchneuronx/repo")
MISSES = ["CLIP", "int8 weights", "NKI"]


def _imported(source: Path, store: LocalStore, run_id: str) -> int:
    tree, repo = open_tree(str(source))
    try:
        return tnx_predictions.commit(store, run_id, tnx_predictions.predictions(tree))
    finally:
        if repo is not None:
            repo.close()


def _scored(store: LocalStore, run_id: str):
    con = connect(store, run_ids=[run_id], view_files=view_files_through("47_report_predictions.sql"))
    return q(con, "SELECT * FROM report_predictions ORDER BY prediction"), q(
        con, "SELECT * FROM report_prediction_rates"
    )


def test_the_15_items_and_12_of_15_held_come_back_from_the_view(tmp_path):
    store = LocalStore(tmp_path / "r")
    assert _imported(FIXTURE, store, "tnx") == 15
    rows, [rate] = _scored(store, "tnx")
    assert len(rows) == 15 and {r["source"] for r in rows} == {"imported"}
    assert (rate["held"], rate["missed"], rate["not_run"], rate["hit_rate"]) == (12, 3, 0, pytest.approx(0.8))
    assert [r["target"] for r in rows if r["verdict"] == "missed"] == MISSES
    siglip = next(r for r in rows if r["target"] == "SigLIP")
    assert siglip["expected"] == "excluded" and siglip["note"] == "predicted: attempt-only, exclusion likely"
    assert siglip["observed_detail"] == "✅ exclusion, as predicted" and siglip["observed"] is None
    assert _imported(FIXTURE, store, "tnx") == 15  # a forced re-import keeps the one registration
    assert len(store.markers("tnx")) == 1


def test_a_table_whose_marks_disagree_with_its_count_is_refused_and_nothing_is_written(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(FIXTURE / tnx_predictions.PATH, src / tnx_predictions.PATH)
    text = (src / tnx_predictions.PATH).read_text().replace("| CLIP | GO | ❌", "| CLIP | GO | ✅")
    (src / tnx_predictions.PATH).write_text(text)
    store = LocalStore(tmp_path / "r")
    with pytest.raises(ImportInputError) as exc:
        _imported(src, store, "tnx")
    assert str(exc.value) == (
        "REPORT-EXTENSIONS.md §13.9: the table's marks give 13 of 15 held, the section says 12 of 15"
    )
    assert store.markers() == []


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"the predecessor's mirror is not at {MIRROR}")
def test_the_predecessors_own_table_scores_12_of_15(tmp_path):
    store = LocalStore(tmp_path / "r")
    assert _imported(MIRROR, store, "tnx-real") == 15
    rows, [rate] = _scored(store, "tnx-real")
    assert (rate["held"], rate["missed"]) == (12, 3) and [
        r["target"] for r in rows if r["verdict"] == "missed"
    ] == MISSES
    assert rows[0]["registered_at"].year == 2026  # the source commit's time
