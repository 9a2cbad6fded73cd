"""The measurement rules have one authority, docs/reference/rules.md: every rule is a numbered heading there, the
rules REPORT.md states (analytics/report/rules.py) are those rules under the same numbers and titles, and every
rule the code cites ("rule 7", "rules 7 and 15") exists on the page."""

from __future__ import annotations

import re
from pathlib import Path

from analytics.report.rules import MEASUREMENT_RULES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "rules.md"
HEADING = re.compile(r"^## (\d+)\. (.+?)\s*$", re.M)
CODE_DIRS = ("agents", "analytics", "control_plane", "infra", "pipeline", "rehearsal", "statemachine", "docs")


def page_rules() -> dict[int, str]:
    return {int(n): title for n, title in HEADING.findall(PAGE.read_text())}


def test_the_page_numbers_every_rule_once_in_order():
    numbers = [int(n) for n, _ in HEADING.findall(PAGE.read_text())]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 20


def test_the_reports_rules_are_the_pages_under_the_same_numbers_and_titles():
    rules = page_rules()
    for number, (title, _summary) in enumerate(MEASUREMENT_RULES, start=1):
        assert rules.get(number) == title, (number, title, rules.get(number))


def test_every_rule_the_code_cites_is_on_the_page():
    rules, missing = page_rules(), []
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".sql", ".js", ".md") or "__pycache__" in path.parts:
                continue
            for m in re.finditer(r"\brules? (\d+)((?:(?:, | and )\d+)*)", path.read_text(errors="replace")):
                for n in [m.group(1), *re.findall(r"\d+", m.group(2))]:
                    if int(n) not in rules:
                        missing.append(f"{path.relative_to(ROOT)}: rule {n}")
    assert missing == []
