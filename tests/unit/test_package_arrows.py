"""The package arrows docs/dev/CONTRACTS.md states hold in the code: the test reads its table and checks every import.

Every ``.py`` file of each package is parsed with ``ast``: imports at module level and inside functions, relative
imports resolved against the file's package. Fixed rules the table may not loosen are asserted on the table itself.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

import pytest

from tests.support.imports import OURS, ROOT, Import, cycles, imports_in, module_graph, package_imports

CONTRACTS = ROOT / "docs" / "dev" / "CONTRACTS.md"
NEVER_IMPORTED = ("tests", "benchmarks")
BOX_ONLY = ("vllm", "torch_neuronx", "optimum", "neuronx_distributed", "libneuronxla")


@dataclass
class Rule:
    allowed: set[str] = field(default_factory=set)
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)
    third_party: set[str] | None = None  # None: any


def parse_rules(text: str) -> dict[str, Rule]:
    """The arrows table of CONTRACTS.md: | package | what it is | may import (of ours) | third-party |."""
    start = text.index("<!-- arrows:")
    rules: dict[str, Rule] = {}
    for row in text[start:].splitlines()[1:]:
        if not row.startswith("|"):
            if rules:
                break
            continue
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        name = re.fullmatch(r"`(\w+)`", cells[0])
        if name is None:
            continue  # the header and its rule
        rule = Rule()
        for arrow in re.finditer(r"`(\w+)`(?:\s*\(only ([^)]*)\))?", cells[2]):
            rule.allowed.add(arrow.group(1))
            if arrow.group(2):
                rule.only[arrow.group(1)] = tuple(re.findall(r"`([\w.]+)`", arrow.group(2)))
        if cells[3] != "any":
            rule.third_party = set(re.findall(r"`([\w.]+)`", cells[3]))
        rules[name.group(1)] = rule
    return rules


RULES = parse_rules(CONTRACTS.read_text())


def violations(package: str, rule: Rule) -> list[str]:
    bad = []
    for imp in package_imports(package):
        top = imp.module.split(".")[0]
        where = f"{imp.source}:{imp.line} imports {imp.module}"
        if top == package or not top:
            continue
        if top in OURS:
            if top not in rule.allowed:
                bad.append(f"{where} ({package} may not import {top})")
            elif top in rule.only and not any(
                imp.module == m or imp.module.startswith(m + ".") for m in rule.only[top]
            ):
                bad.append(f"{where} ({package} may import only {', '.join(rule.only[top])} of {top})")
        elif top not in sys.stdlib_module_names and rule.third_party is not None and top not in rule.third_party:
            bad.append(f"{where} (third-party; {package} may use only stdlib and {sorted(rule.third_party)})")
    return bad


def test_the_table_covers_every_package_and_keeps_the_fixed_rules():
    products = {p for p in OURS if p not in NEVER_IMPORTED}
    assert set(RULES) == products
    assert all((ROOT / p).is_dir() for p in products)
    assert RULES["pipeline"].allowed == set() and RULES["pipeline"].third_party == {"pydantic"}
    assert RULES["analytics"].allowed == {"pipeline"}
    assert not RULES["agents"].allowed & {"control_plane", "infra", "rehearsal"}
    assert RULES["statemachine"].allowed == set() and RULES["statemachine"].third_party == set()
    assert RULES["rehearsal"].only.get("infra") == ("infra.app", "infra.bundling")
    assert not any(RULES[p].allowed & set(NEVER_IMPORTED) for p in products)
    for rule in RULES.values():
        assert rule.allowed <= products and set(rule.only) <= rule.allowed


@pytest.mark.parametrize("package", sorted(RULES))
def test_each_package_imports_only_what_contracts_md_allows(package: str):
    assert violations(package, RULES[package]) == []


def unused_arrows(package: str, rule: Rule) -> list[str]:
    """Arrows the table allows that no import of ``package`` takes (an arrow, or a module of an "(only ...)" list)."""
    used = [imp.module for imp in package_imports(package)]
    unused = [
        f"{package} -> {target}"
        for target in sorted(rule.allowed)
        if not any(m == target or m.startswith(target + ".") for m in used)
    ]
    for modules in rule.only.values():
        unused += [f"{package} -> {m}" for m in modules if not any(u == m or u.startswith(m + ".") for u in used)]
    return unused


@pytest.mark.parametrize("package", sorted(RULES))
def test_the_table_lists_no_arrow_the_code_does_not_take(package: str):
    assert unused_arrows(package, RULES[package]) == []


@pytest.mark.parametrize("package", sorted(RULES))
def test_no_package_imports_the_tests_or_the_benchmarks(package: str):
    hits = [
        f"{i.source}:{i.line} {i.module}" for i in package_imports(package) if i.module.split(".")[0] in NEVER_IMPORTED
    ]
    assert hits == []


@pytest.mark.parametrize("package", sorted(RULES))
def test_box_only_packages_are_never_imported_at_module_level(package: str):
    hits = [
        f"{i.source}:{i.line} {i.module}"
        for i in package_imports(package)
        if i.top_level and i.module.split(".")[0] in BOX_ONLY
    ]
    assert hits == []


def test_no_import_cycle_anywhere_in_the_product():
    products = [p for p in OURS if p not in NEVER_IMPORTED]
    edges = module_graph(*products)
    assert len(edges) > 200 and "pipeline.graph" in edges
    assert cycles(edges) == []


def test_the_reader_resolves_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "analytics" / "inner"
    pkg.mkdir(parents=True)
    (tmp_path / "analytics" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from . import leaf\nfrom .. import sibling\n")
    (pkg / "leaf.py").write_text("")
    (tmp_path / "analytics" / "sibling.py").write_text("")
    probe = pkg / "probe.py"
    probe.write_text(
        "import json\nfrom .leaf import x\nfrom ..sibling import y\n"
        "def f():\n    from control_plane.cli import main\n    import vllm\n"
        "if True:\n    import agents.runner\n"
    )
    got = {(i.module, i.top_level) for i in imports_in(probe, tmp_path)}
    assert got == {
        ("json", True),
        ("analytics.inner.leaf", True),
        ("analytics.sibling", True),
        ("control_plane.cli", False),
        ("vllm", False),
        ("agents.runner", True),
    }
    init = {i.module for i in imports_in(pkg / "__init__.py", tmp_path)}
    assert init == {"analytics.inner.leaf", "analytics.sibling"}


def test_a_forbidden_arrow_and_a_stray_third_party_import_are_reported(monkeypatch):
    fake = [
        Import("pipeline/x.py", 3, "control_plane.cli", False),
        Import("pipeline/x.py", 4, "numpy", True),
        Import("pipeline/x.py", 5, "pydantic", True),
        Import("pipeline/x.py", 6, "json", True),
        Import("pipeline/x.py", 7, "pipeline.slo", True),
    ]
    monkeypatch.setattr(sys.modules[__name__], "package_imports", lambda package: fake)
    bad = violations("pipeline", RULES["pipeline"])
    assert len(bad) == 2 and "control_plane.cli" in bad[0] and "numpy" in bad[1]
    only = [Import("rehearsal/x.py", 1, "infra.stacks.box", True), Import("rehearsal/x.py", 2, "infra.app", True)]
    monkeypatch.setattr(sys.modules[__name__], "package_imports", lambda package: only)
    assert violations("rehearsal", RULES["rehearsal"]) == [
        "rehearsal/x.py:1 imports infra.stacks.box (rehearsal may import only infra.app, infra.bundling of infra)"
    ]
