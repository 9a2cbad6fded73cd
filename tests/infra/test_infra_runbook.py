"""docs/guides/deploy-and-operate.md: the first-deploy checklist is there, in order, and names real things."""
from __future__ import annotations

import re
from pathlib import Path

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploy-and-operate.md"


def _section(title: str) -> str:
    text = RUNBOOK.read_text()
    start = text.index(f"## {title}") if f"## {title}" in text else -1
    assert start >= 0, f"runbook has no section {title!r}"
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_before_the_first_paid_run_is_an_ordered_checklist_of_real_checks():
    section = _section("9. Before the first paid run")
    steps = re.findall(r"^(\d+)\. \*\*([^*]+)\*\*", section, flags=re.M)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 8
    order = [title.lower() for _, title in steps]
    for earlier, later in (("quotas", "az offerings"), ("amis resolve", "layer built"),
                           ("layer built", "rehearsal passes"), ("rehearsal passes", "first run: smoke")):
        assert any(earlier in t for t in order) and any(later in t for t in order)
        assert min(i for i, t in enumerate(order) if earlier in t) < min(i for i, t in enumerate(order) if later in t)
    for needle in ("L-2C3B7624", "L-1945791B", "make lambda-deps", "neuronpipe rehearse", "budget_alert_email",
                   "max_cost_usd_ceiling", "boxes running: 0"):
        assert needle in section, needle
    for placeholder in ("TODO", "TBD", "XXX", "placeholder", "<fill", "FIXME"):
        assert placeholder.lower() not in section.lower(), placeholder


def test_redeploy_after_destroy_is_documented():
    section = _section("8. Deploying again after `cdk destroy`")
    assert '"existing_results_bucket": true' in section and "RETAIN" in section
