"""Settings, user data rendering and Lambda bundling: pure, no synth."""

from __future__ import annotations

import sys

import pytest

from infra.bundling import (
    BundlingError,
    lambda_deps_ready,
    pip_command,
    prune,
    stage_harness,
    stage_lambda_code,
    stage_packages,
)
from infra.config import (
    INFERENTIA_DLAMI_SSM_PARAMETER,
    INFERENTIA_PINNED_AMIS,
    TRAINIUM_DLAMI_SSM_PARAMETER,
    DeploymentSettings,
    SettingsError,
)
from infra.user_data import BoxUserDataValues, UserDataError, fill, render_box_user_data


def test_defaults_are_valid_and_offline():
    s = DeploymentSettings.from_context({"account": None})
    assert s.ssm_connectivity == "nat" and [(sc.name, sc.enabled) for sc in s.schedules] == [("nightly-smoke", False)]
    assert s.box("inf2").ebs_swap_gib == 48 and s.box("trn1").nvme_swap_gib > 0
    assert s.box("trn1").instance_type == "trn1.2xlarge" and s.box("inf2").instance_type == "inf2.xlarge"


def test_unknown_setting_fails_listing_valid_ones():
    with pytest.raises(SettingsError) as exc:
        DeploymentSettings.from_context({"monthly_budget": 10})
    assert "monthly_budget" in str(exc.value) and "monthly_budget_usd" in str(exc.value)


@pytest.mark.parametrize(
    "raw, word",
    [
        ({"trainium_az": "us-west-2a"}, "trainium_az"),
        ({"availability_zones": ["us-east-1a"], "trainium_az": "us-east-1a", "inferentia_az": "us-east-1a"}, "region"),
        ({"ssm_connectivity": "vpn"}, "ssm_connectivity"),
        ({"monthly_budget_usd": 0}, "monthly_budget_usd"),
        ({"trainium_ami_id": "ami-PLACEHOLDER"}, "trainium_ami_id"),
        ({"dataset_uri": "https://example.com/data"}, "dataset_uri"),
        ({"max_cost_usd_ceiling": 0}, "max_cost_usd_ceiling"),
    ],
)
def test_bad_settings_name_the_setting(raw, word):
    with pytest.raises(SettingsError, match=word):
        DeploymentSettings.from_context(raw)


def test_defaults_of_the_deploy_path():
    """Layer required (INTERFACES E), the cost ceiling (D), the lease table name (B)."""
    s = DeploymentSettings.from_context({})
    assert s.require_lambda_deps is True
    assert s.max_cost_usd_ceiling == 50.0
    assert s.lease_table == "neuron-pipelines-leases"
    assert DeploymentSettings.from_context({"state_machine_name": "np-dev"}).lease_table == "np-dev-leases"
    assert s.existing_results_bucket is False and s.dataset_uri is None and s.dataset_location is None
    assert DeploymentSettings.from_context({"dataset_uri": "s3://my-data/sets/sft/"}).dataset_location == (
        "my-data",
        "sets/sft/",
    )


def test_context_given_as_a_json_string_is_read():  # `cdk -c neuronpipe='{...}'` passes a string
    assert DeploymentSettings.from_context('{"monthly_budget_usd": 12}').monthly_budget_usd == 12
    with pytest.raises(SettingsError, match="not JSON"):
        DeploymentSettings.from_context("{nope")


def test_endpoints_only_networking_is_refused_with_the_reason():
    with pytest.raises(SettingsError) as exc:
        DeploymentSettings.from_context({"ssm_connectivity": "endpoints"})
    message = str(exc.value)
    assert "ssm_connectivity='endpoints' is refused" in message and "PyPI" in message and "nat_and_endpoints" in message
    assert "\n" not in message
    assert (
        DeploymentSettings.from_context({"ssm_connectivity": "nat_and_endpoints"}).ssm_connectivity
        == "nat_and_endpoints"
    )


def test_amis_are_pinned_or_resolved_by_ec2_at_launch_from_a_framework_versioned_parameter():
    s = DeploymentSettings.from_context({})
    trn, inf = s.ami("trn1"), s.ami("inf2")
    assert trn.ami_id is None and trn.ssm_parameter == TRAINIUM_DLAMI_SSM_PARAMETER
    # the PyTorch 2.9 DLAMI (torch-neuronx 2.9, the lanes' stack), not the multi-framework line that moves with
    # every SDK release; EC2 resolves it once, when it launches the box
    assert TRAINIUM_DLAMI_SSM_PARAMETER == "/aws/service/neuron/dlami/pytorch-2.9/ubuntu-24.04/latest/image_id"
    assert trn.image_id == "resolve:ssm:" + TRAINIUM_DLAMI_SSM_PARAMETER
    assert "aws ssm get-parameter --name " + TRAINIUM_DLAMI_SSM_PARAMETER in trn.check
    # inf2 in us-west-2 keeps the vLLM 0.16 pin (the newer vLLM line cannot serve inf2)
    assert inf.ami_id == INFERENTIA_PINNED_AMIS["us-west-2"].ami_id == "ami-035c945d557065665" == inf.image_id
    # a region without a pin: inf2 resolves the vLLM DLAMI parameter at launch; no region is refused
    east = DeploymentSettings.from_context(
        {
            "region": "us-east-2",
            "availability_zones": ["us-east-2b"],
            "trainium_az": "us-east-2b",
            "inferentia_az": "us-east-2b",
        }
    )
    assert east.ami("inf2").ssm_parameter == INFERENTIA_DLAMI_SSM_PARAMETER and east.ami("inf2").ami_id is None
    # an explicit pin wins for either box; a parameter may name its version (an exact image)
    pinned = DeploymentSettings.from_context(
        {"trainium_ami_id": "ami-0123456789abcdef0", "inferentia_ami_id": "ami-0fedcba9876543210"}
    )
    assert pinned.ami("trn1").ami_id == "ami-0123456789abcdef0" and pinned.ami("trn1").ssm_parameter is None
    assert pinned.ami("inf2").ami_id == "ami-0fedcba9876543210"
    versioned = DeploymentSettings.from_context({"trainium_ami_parameter": TRAINIUM_DLAMI_SSM_PARAMETER + ":7"})
    assert versioned.ami("trn1").image_id == f"resolve:ssm:{TRAINIUM_DLAMI_SSM_PARAMETER}:7"
    with pytest.raises(SettingsError, match="trainium_ami_parameter"):
        DeploymentSettings.from_context({"trainium_ami_parameter": "resolve:ssm:/x"})


def test_budget_alert_email_is_an_address_or_the_explicit_opt_out():
    assert DeploymentSettings.from_context({"budget_alert_email": "ops@example.com"}).budget_alert_email
    assert DeploymentSettings.from_context({"budget_alert_email": "none"}).budget_alert_email == "none"
    with pytest.raises(SettingsError, match="budget_alert_email"):
        DeploymentSettings.from_context({"budget_alert_email": "ops"})


def _values(**kw) -> BoxUserDataValues:
    base = dict(
        box_role="trn1",
        region="us-west-2",
        results_uri="s3://b/results",
        harness_param="/neuronpipe/harness/uri",
        cache_volume_id="vol-0123456789abcdef0",
        swap_volume_id="",
        nvme_swap_gib=64,
        dlami_venv_glob="/opt/aws_neuronx_venv_pytorch_*",
        hf_token_secret="neuronpipe/hf-token",
    )
    base.update(kw)
    return BoxUserDataValues(**base)


def test_user_data_fills_every_placeholder_and_fits():
    text = render_box_user_data(_values())
    assert "@@" not in text
    assert text.startswith("#!/bin/bash")
    assert "BOX_ROLE='trn1'" in text and "CACHE_VOLUME_ID='vol-0123456789abcdef0'" in text
    assert len(text.encode()) < 16 * 1024
    inf = render_box_user_data(_values(box_role="inf2", swap_volume_id="vol-0fedcba9876543210", nvme_swap_gib=0))
    assert "SWAP_VOLUME_ID='vol-0fedcba9876543210'" in inf and "BOX_ROLE='inf2'" in inf


def test_fill_refuses_a_placeholder_without_value_and_a_value_without_placeholder():
    with pytest.raises(UserDataError, match="NOPE"):
        fill("echo @@NOPE@@", {"OTHER": "x"})
    with pytest.raises(UserDataError, match="OTHER"):
        fill("echo @@NOPE@@", {"NOPE": "x", "OTHER": "y"})


def test_lambda_code_is_first_party_only_without_caches(tmp_path):
    src = tmp_path / "src"
    for pkg in ("pipeline", "analytics", "agents", "control_plane", "statemachine"):
        (src / pkg / "__pycache__").mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("")
        (src / pkg / "__pycache__" / "x.pyc").write_bytes(b"")
    out = stage_lambda_code(tmp_path / "out", root=src)
    assert sorted(p.name for p in out.iterdir()) == ["agents", "analytics", "control_plane", "pipeline", "statemachine"]
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
    assert (out / "box" / "install.sh").is_file() and (out / "box" / "usr/local/bin/neuronpipe-sync").is_file()


def test_lambda_deps_are_built_for_the_lambda_platform_not_here(tmp_path):
    cmd = pip_command(tmp_path)
    assert cmd[0] == sys.executable
    assert "--only-binary=:all:" in cmd and "manylinux2014_x86_64" in cmd and "--target" in cmd
    assert not lambda_deps_ready(tmp_path / "none")


def test_prune_drops_runtime_provided_and_unused_parts(tmp_path):
    for rel in (
        "boto3/__init__.py",
        "botocore/__init__.py",
        "pyarrow/tests/t.py",
        "pyarrow/lib.so",
        "pyarrow/libarrow_flight.so.2600",
        "duckdb/__init__.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    prune(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["duckdb/__init__.py", "pyarrow/lib.so"]


def test_prune_keeps_only_plotly_js_of_the_plotly_package(tmp_path):
    """The layer carries plotly for REPORT.html's plotly.min.js alone; the page's asset lookup still finds it."""
    for rel in (
        "plotly/__init__.py",
        "plotly/graph_objs/_figure.py",
        "plotly/package_data/plotly.min.js",
        "plotly/package_data/templates/plotly.json",
        "plotly-7.1.0.dist-info/METADATA",
        "narwhals/__init__.py",
        "pyarrow/lib.so",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("/** plotly.js v9.9.9 */" if rel.endswith(".js") else "")
    prune(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == [
        "plotly-7.1.0.dist-info/METADATA",
        "plotly/__init__.py",
        "plotly/package_data/plotly.min.js",
        "pyarrow/lib.so",
    ]
    import subprocess
    from pathlib import Path

    probe = (
        "import sys; sys.path[:0] = sys.argv[1:3]; from analytics.report.html_assets import chart_library; "
        "lib = chart_library(); print(lib.version, lib.path)"
    )
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-I", "-c", probe, str(tmp_path), root], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "9.9.9" and out.stdout.split()[1].startswith(str(tmp_path))


def test_synth_without_the_layer_fails_naming_make_lambda_deps(tmp_path, capsys):
    """The deploy path (require_lambda_deps defaults to true) refuses to synthesize without the layer."""
    from infra.app import main

    rc = main(["--outdir", str(tmp_path / "out"), "--setting", f"lambda_deps_dir={tmp_path / 'no-layer'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert err[0].startswith("error: Lambda dependency layer missing at ") and "`make lambda-deps`" in err[0]
    assert not list((tmp_path / "out").glob("*.template.json"))  # nothing synthesized


def test_bad_setting_on_the_command_line_is_one_line(tmp_path, capsys):
    from infra.app import main

    assert main(["--outdir", str(tmp_path), "--setting", "ssm_connectivity=endpoints"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ssm_connectivity='endpoints' is refused" in err[0]
    assert main(["--setting", "no-equals-sign"]) == 1
    assert "expected name=value" in capsys.readouterr().err
