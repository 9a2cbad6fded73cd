"""The rules package imports none of ours and no third-party package but pydantic: every package may import it
(the Lambdas need only it), so an import of ``agents`` or torch from it would reach everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.imports import imports_in

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p for p in (ROOT / "pipeline").rglob("*.py"))
ALLOWED = set(sys.stdlib_module_names) | {"pipeline", "pydantic", "pydantic_core"}
OURS = ("agents", "control_plane", "analytics", "rehearsal", "infra", "statemachine", "tests")


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in the file, module level or inside a function."""
    return [(i.line, i.module.split(".")[0]) for i in imports_in(path)]


def test_no_module_of_the_rules_imports_anything_but_the_stdlib_pydantic_and_itself():
    assert len(MODULES) > 10 and (ROOT / "pipeline" / "__init__.py").is_file()
    offenders = [
        f"{p.relative_to(ROOT)}:{line}: {name}" for p in MODULES for line, name in _imports(p) if name not in ALLOWED
    ]
    assert offenders == []


def test_importing_every_module_of_the_rules_loads_none_of_our_other_packages():
    names = [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in MODULES]
    probe = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {OURS!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == []
