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
    return text[start : end if end > 0 else None]


def test_before_the_first_paid_run_is_an_ordered_checklist_of_real_checks():
    section = _section("9. Before the first paid run")
    steps = re.findall(r"^(\d+)\. \*\*([^*]+)\*\*", section, flags=re.M)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 8
    order = [title.lower() for _, title in steps]
    for earlier, later in (
        ("quotas", "az offerings"),
        ("amis resolve", "layer built"),
        ("layer built", "rehearsal passes"),
        ("rehearsal passes", "first run: smoke"),
    ):
        assert any(earlier in t for t in order) and any(later in t for t in order)
        assert min(i for i, t in enumerate(order) if earlier in t) < min(i for i, t in enumerate(order) if later in t)
    for needle in (
        "L-2C3B7624",
        "L-1945791B",
        "make lambda-deps",
        "neuronpipe rehearse",
        "budget_alert_email",
        "max_cost_usd_ceiling",
        "boxes running: 0",
    ):
        assert needle in section, needle
    for placeholder in ("TODO", "TBD", "XXX", "placeholder", "<fill", "FIXME"):
        assert placeholder.lower() not in section.lower(), placeholder


def test_redeploy_after_destroy_is_documented():
    section = _section("8. Deploying again after `cdk destroy`")
    assert '"existing_results_bucket": true' in section and "RETAIN" in section


def _code_blocks() -> list[str]:
    return re.findall(r"```\n(.*?)```", RUNBOOK.read_text(), flags=re.S)


def _commands(block: str) -> list[str]:
    """Each shell command of a code block, its continuation lines joined."""
    out, current = [], ""
    for line in block.splitlines():
        current += " " + line.strip().rstrip("\\")
        if not line.rstrip().endswith("\\"):
            out.append(current.strip())
            current = ""
    return [c for c in out if c]


def test_every_aws_command_names_its_region():
    """Issue 28: the runbook passed --region to some commands; `neuronpipe run --aws`, `status` and `pull` had no
    such option and used boto3's default region. Every AWS CLI call and every neuronpipe command that calls AWS
    says --region."""
    seen = 0
    for block in _code_blocks():
        for command in _commands(block):
            for part in re.split(r"\$\(|;|\|\||&&|\bdo\b", command):
                part = part.strip()
                if re.match(r"aws [a-z0-9-]+ [a-z0-9-]+", part) or re.search(
                    r"neuronpipe (run --aws|status|pull)\b", part
                ):
                    seen += 1
                    assert "--region" in part, part
    assert seen >= 15


def test_prerequisites_deploy_budget_amis_and_box_scripts_are_documented():
    from infra.app import BudgetSubscriberMissingError
    from infra.config import TRAINIUM_DLAMI_SSM_PARAMETER

    text = RUNBOOK.read_text()
    prerequisites = _section("1. Prerequisites")
    assert "Session Manager plugin" in prerequisites and "session-manager-plugin --version" in prerequisites
    assert TRAINIUM_DLAMI_SSM_PARAMETER in prerequisites and "resolve:ssm:" in prerequisites
    assert "trainium_ami_id" in prerequisites and "per DLAMI and framework version" in prerequisites
    # the refusal is quoted as the code prints it
    message = " ".join(str(BudgetSubscriberMissingError()).split())
    assert message in " ".join(_section("2. Configure").split()) and '"none"' in _section("2. Configure")
    deploy = _section("3. Build, synth, deploy")
    assert deploy.index("cdk diff --all") < deploy.index("cdk deploy --all")
    assert "replace" in deploy and "new box" in deploy and "compile-cache volume" in deploy
    assert "box-scripts.sha256" in deploy and "next harness sync" in deploy
    assert "neuronpipe:bootstrap=done" in text
