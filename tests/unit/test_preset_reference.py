"""docs/reference/presets.md is exactly what the lane registry and the graph rules generate, and no other page lists a
preset's waves by hand (they link the generated page)."""

from __future__ import annotations

from pathlib import Path

from control_plane.preset_reference import OUTPUT, REGENERATE, generate

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_presets_page_is_what_the_registry_generates():
    assert (ROOT / OUTPUT).read_text() == generate(), f"{OUTPUT} is stale: run `{REGENERATE}` and commit the result"


def test_the_full_preset_runs_the_merge_consumers_in_the_second_wave():
    text = generate()
    full = text.split("## `full`", 1)[1].split("\n## ", 1)[0]
    assert "| 1 | — | quality, accuracy, finetune_serve |" in full


def test_no_other_page_lists_the_waves_by_hand():
    pages = [p for p in (ROOT / "docs").rglob("*.md") if p != ROOT / OUTPUT] + [ROOT / "README.md"]
    by_hand = [
        str(p.relative_to(ROOT))
        for p in pages
        if "| wave | trn1 | inf2 |" in p.read_text() or "wave 1 runs inf2 [" in p.read_text()
    ]
    assert by_hand == []
