"""Every link and file path in README.md and docs/ resolves to a file of this repository, and none leaves it.

Checked: relative Markdown links (their anchors too, against the target page's headings), every path in backticks
or in a code block that starts with one of the repository's folders, and every mention of a ``docs/….md`` page,
in the documentation and in the code's docstrings, help texts and messages.
"""

from __future__ import annotations

import glob
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Folders of the repository itself (not build outputs or virtualenvs, which a fresh clone does not have).
REPO_DIRS = (
    "agents",
    "analytics",
    "benchmarks",
    "control_plane",
    "docs",
    "examples",
    "infra",
    "pipeline",
    "rehearsal",
    "statemachine",
    "tests",
)
CODE_DIRS = (
    "agents",
    "analytics",
    "benchmarks",
    "control_plane",
    "infra",
    "pipeline",
    "rehearsal",
    "statemachine",
    "tests",
)
SOURCE_SUFFIXES = (".py", ".sql", ".sh", ".txt", ".toml", ".cfg", ".j2", ".json")

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
DOC_MENTION = re.compile(r"(?<![\w./-])docs/[\w./-]*\.md\b")
# A page named without its folder ("rules.md", "CONTRACTS.md"): some page of the repository must have that name.
BARE_PAGE = re.compile(r"(?<![\w./-])([A-Za-z][\w-]*\.md)\b")
OUTPUT_PAGES = {"REPORT.md"}  # what the product writes, not a page of the repository
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: link text kept, formatting dropped, lower case, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in HEADING.findall(FENCE.sub("", text)):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def expand(path: str) -> list[str]:
    """``a/{b,c}.py`` -> [a/b.py, a/c.py]; ``<name>`` placeholders become globs."""
    parts = re.split(r"(\{[^}]*\})", re.sub(r"<[^>]*>", "*", path))
    choices = [p[1:-1].split(",") if p.startswith("{") else [p] for p in parts]
    return ["".join(c) for c in itertools.product(*choices)]


def page_names() -> set[str]:
    return {p.name for p in doc_files()} | {p.name for folder in REPO_DIRS for p in (ROOT / folder).rglob("*.md")}


def stale_bare_pages(text: str, names: set[str]) -> list[str]:
    """Page names without a folder that name no page of the repository (nor a file the product writes)."""
    return [m for m in BARE_PAGE.findall(text) if m not in names and m not in OUTPUT_PAGES]


def exists(path: str) -> bool:
    return any(glob.glob(str(ROOT / p)) if any(ch in p for ch in "*?[") else (ROOT / p).exists() for p in expand(path))


def path_words(text: str) -> list[str]:
    """Repository paths in a piece of code: words starting with one of REPO_DIRS, suffixes trimmed."""
    out = []
    for word in re.split(r"[\s=]+", text):
        word = re.sub(r"^(?:file://|[(\"'\[])+", "", word)
        if not word.startswith(tuple(f"{d}/" for d in REPO_DIRS)):
            continue
        word = re.split(r"::|#", word)[0]  # pytest node ids, anchors
        word = re.sub(r":[\w.]*$", "", word)  # `file.py:symbol`, `file.py:12`
        word = word.rstrip(".,;:)\"'`]")
        out.append(word)
    return out


def code_texts(text: str) -> list[str]:
    fenced = [m.group(0) for m in FENCE.finditer(text)]
    spans = [m.group(2) for m in CODE_SPAN.finditer(FENCE.sub("", text))]
    return fenced + spans


def broken_in(page: Path, text: str | None = None) -> list[str]:
    """What does not resolve in ``page`` (its ``text``, read from the page unless given)."""
    text = page.read_text() if text is None else text
    rel = page.relative_to(ROOT)
    problems = []
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    for target in LINK.findall(prose):
        if SCHEME.match(target) or target.startswith("/"):
            problems.append(f"{rel}: link leaves the repository: {target}")
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if ROOT not in dest.parents and dest != ROOT:
            problems.append(f"{rel}: link leaves the repository: {target}")
        elif file_part and not dest.exists():
            problems.append(f"{rel}: broken link: {target}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(text if dest == page else dest.read_text()):
            problems.append(f"{rel}: no heading for anchor: {target}")
    for code in code_texts(text):
        for path in path_words(code):
            if not exists(path):
                problems.append(f"{rel}: path in code does not exist: {path}")
    for mention in DOC_MENTION.findall(text):
        if not exists(mention):
            problems.append(f"{rel}: no such page: {mention}")
    for name in stale_bare_pages(text, page_names()):
        problems.append(f"{rel}: no page of that name: {name}")
    return problems


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_path_in_the_documentation_resolves_inside_the_repository(page: Path):
    assert broken_in(page) == []


def source_files() -> list[Path]:
    """The code and its companions (SQL, shell, requirement files) plus the repository's top-level files."""
    found = [
        p
        for folder in CODE_DIRS
        for p in sorted((ROOT / folder).rglob("*"))
        if p.is_file() and p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts and p.stat().st_size < 1_000_000
    ]
    return found + [
        p for p in sorted(ROOT.iterdir()) if p.is_file() and (p.suffix in SOURCE_SUFFIXES or p.name == "Makefile")
    ]


def test_code_mentions_only_pages_that_exist():
    stale = []
    names = page_names()
    sources = source_files()
    assert any(p.suffix == ".sql" for p in sources) and any(p.name == "Makefile" for p in sources)
    for source in sources:
        if source.resolve() == Path(__file__).resolve():
            continue  # its probe names a missing page on purpose
        text = source.read_text(errors="replace")
        for mention in DOC_MENTION.findall(text):
            if not exists(mention):
                stale.append(f"{source.relative_to(ROOT)}: {mention}")
        stale += [f"{source.relative_to(ROOT)}: {name}" for name in stale_bare_pages(text, names)]
    assert stale == []


def test_nothing_in_the_documentation_points_outside_the_repository():
    outside = re.compile(r"\.\./shared|/work/|(?<![\w/])shared/")
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in doc_files() for m in outside.finditer(p.read_text())]
    assert hits == []


def test_the_checker_catches_a_broken_link_a_stale_path_and_an_escape():
    page = ROOT / "docs" / "probe.md"  # never written: the text is given
    problems = broken_in(
        page,
        "[gone](nowhere.md) [out](../../elsewhere/x.md) [web](https://example.com) "
        "[bad anchor](#no-such-heading) `analytics/no_such_module.py` " + "docs/" + "no/such/page.md\n"
        "[ok](../README.md) `analytics/views/sql/*.sql` `analytics/schema/{core,serving}.py`\n"
        "[here](#a-heading) RULES.md and " + "METRICS" + ".md, not REPORT.md nor rules.md\n\n## A heading\n",
    )
    assert len(problems) == 9, problems
    assert sorted(p.rsplit(": ", 1)[1] for p in problems if "no page of that name" in p) == [
        "METRICS.md",
        "RULES.md",
        "nowhere.md",
    ]
    assert sum("leaves the repository" in p for p in problems) == 2
    assert any("nowhere.md" in p for p in problems) and any("#no-such-heading" in p for p in problems)
    assert any("analytics/no_such_module.py" in p for p in problems)
    assert any(("docs/" + "no/such/page.md") in p for p in problems)
    assert slug("Rate batches: [`point_rate_batches`](../x.sql)") == "rate-batches-point_rate_batches"
    assert slug("Running locally: `run --local`") == "running-locally-run---local"
