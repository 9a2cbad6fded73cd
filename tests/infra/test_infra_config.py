"""Settings, user data rendering and Lambda bundling: pure, no synth."""
from __future__ import annotations

import sys

import pytest

from infra.bundling import (BundlingError, lambda_deps_ready, pip_command, prune, stage_harness,
                            stage_lambda_code, stage_packages)
from infra.config import INFERENTIA_AMIS, TRAINIUM_AMIS, DeploymentSettings, SettingsError, ami_for
from infra.user_data import BoxUserDataValues, UserDataError, fill, render_box_user_data


def test_defaults_are_valid_and_offline():
    s = DeploymentSettings.from_context({"account": None})
    assert s.ssm_connectivity == "nat" and s.nightly_smoke_enabled is False
    assert s.box("inf2").ebs_swap_gib == 48 and s.box("trn1").nvme_swap_gib > 0
    assert s.box("trn1").instance_type == "trn1.2xlarge" and s.box("inf2").instance_type == "inf2.xlarge"


def test_unknown_setting_fails_listing_valid_ones():
    with pytest.raises(SettingsError) as exc:
        DeploymentSettings.from_context({"monthly_budget": 10})
    assert "monthly_budget" in str(exc.value) and "monthly_budget_usd" in str(exc.value)


@pytest.mark.parametrize("raw, word", [
    ({"trainium_az": "us-west-2a"}, "trainium_az"),
    ({"availability_zones": ["us-east-1a"], "trainium_az": "us-east-1a", "inferentia_az": "us-east-1a"}, "region"),
    ({"ssm_connectivity": "vpn"}, "ssm_connectivity"),
    ({"monthly_budget_usd": 0}, "monthly_budget_usd"),
])
def test_bad_settings_name_the_setting(raw, word):
    with pytest.raises(SettingsError, match=word):
        DeploymentSettings.from_context(raw)


def test_region_without_pins_fails_listing_pinned_regions():
    with pytest.raises(SettingsError, match="pinned regions: us-east-1, us-west-2"):
        DeploymentSettings.from_context({"region": "eu-west-1", "availability_zones": ["eu-west-1a"],
                                         "trainium_az": "eu-west-1a", "inferentia_az": "eu-west-1a"})
    assert ami_for("inf2", "us-west-2") is INFERENTIA_AMIS["us-west-2"]


def test_pins_say_how_to_refresh():
    for pin in TRAINIUM_AMIS.values():
        assert "aws ssm get-parameter" in pin.refresh and "/aws/service/neuron/dlami/" in pin.refresh
    assert INFERENTIA_AMIS["us-west-2"].verified


def _values(**kw) -> BoxUserDataValues:
    base = dict(box_role="trn1", region="us-west-2", results_uri="s3://b/results", harness_param="/neuronpipe/harness/uri",
                cache_volume_id="vol-0123456789abcdef0", swap_volume_id="", nvme_swap_gib=64,
                dlami_venv_glob="/opt/aws_neuronx_venv_pytorch_*", hf_token_secret="neuronpipe/hf-token")
    base.update(kw)
    return BoxUserDataValues(**base)


def test_user_data_fills_every_placeholder_and_fits():
    text = render_box_user_data(_values())
    assert "@@" not in text
    assert text.startswith("#!/bin/bash")
    assert "NEURONPIPE_BOX_ROLE=trn1" in text and "vol-0123456789abcdef0" in text
    assert len(text.encode()) < 16 * 1024
    inf = render_box_user_data(_values(box_role="inf2", swap_volume_id="vol-0fedcba9876543210", nvme_swap_gib=0))
    assert "vol-0fedcba9876543210" in inf and "NEURONPIPE_BOX_ROLE=inf2" in inf


def test_fill_refuses_a_placeholder_without_value():
    with pytest.raises(UserDataError, match="NOPE"):
        fill("echo @@NOPE@@", {"OTHER": "x"})


def test_lambda_code_is_first_party_only_without_caches(tmp_path):
    src = tmp_path / "src"
    for pkg in ("analytics", "agents", "control_plane", "statemachine"):
        (src / pkg / "__pycache__").mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("")
        (src / pkg / "__pycache__" / "x.pyc").write_bytes(b"")
    out = stage_lambda_code(tmp_path / "out", root=src)
    assert sorted(p.name for p in out.iterdir()) == ["agents", "analytics", "control_plane", "statemachine"]
    assert not list(out.rglob("*.pyc"))
    with pytest.raises(BundlingError, match="nope"):
        stage_packages(tmp_path / "x", ("nope",), root=src)


def test_harness_carries_pins_and_sha(tmp_path):
    out = stage_harness(tmp_path / "h", sha="abc123")
    assert (out / "HARNESS_SHA").read_text().strip() == "abc123"
    pins = (out / "box-requirements.txt").read_text().splitlines()
    reqs = [line for line in pins if line and not line.startswith(("#", "-"))]  # "-" lines: pip options
    assert reqs and all("==" in line for line in reqs)
    assert (out / "pyproject.toml").is_file() and (out / "agents" / "__init__.py").is_file()


def test_lambda_deps_are_built_for_the_lambda_platform_not_here(tmp_path):
    cmd = pip_command(tmp_path)
    assert cmd[0] == sys.executable
    assert "--only-binary=:all:" in cmd and "manylinux2014_x86_64" in cmd and "--target" in cmd
    assert not lambda_deps_ready(tmp_path / "none")


def test_prune_drops_runtime_provided_and_unused_parts(tmp_path):
    for rel in ("boto3/__init__.py", "botocore/__init__.py", "pyarrow/tests/t.py", "pyarrow/lib.so",
                "pyarrow/libarrow_flight.so.2600", "duckdb/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    prune(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["duckdb/__init__.py", "pyarrow/lib.so"]
