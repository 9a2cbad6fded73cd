"""The box scripts as rendered (INTERFACES A): parse under bash and dash, box paths under
NEURONPIPE_BOX_ROOT, IMDS endpoint overridable, the per-boot marker, and neuronpipe-sync run for
real under /bin/sh in a sandbox root with a fake `aws`, installing the harness offline."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from infra.bundling import stage_harness
from infra.user_data import (BOOT_DONE_PATH, PER_BOOT_PATH, SYNC_PATH, BoxScripts, BoxUserDataValues,
                             render_box_scripts)

HARNESS_PARAM = "/neuronpipe/harness/uri"
HARNESS_URI = "s3://cdk-assets-bucket/0123abcd.zip"
BOX_PATHS = ("opt/neuronpipe", "etc/neuronpipe", "usr/local/bin/neuronpipe", "var/lib/cloud/scripts/per-boot",
             "var/log/neuronpipe", "var/lib/neuronpipe", "var/cache/neuronpipe", "run/neuronpipe")
# a box path written without the root in front: "/opt/neuronpipe" not preceded by $ROOT, $R or ${...}
BARE_BOX_PATH = re.compile(r"(?<![\w}$])(?<!\$ROOT)(?<!\$R)/(" + "|".join(map(re.escape, BOX_PATHS)) + r")")


def _scripts(role: str = "trn1") -> BoxScripts:
    return render_box_scripts(BoxUserDataValues(
        box_role=role, region="us-west-2", results_uri="s3://b/results", harness_param=HARNESS_PARAM,
        cache_volume_id="vol-0123456789abcdef0", swap_volume_id="" if role == "trn1" else "vol-0fedcba9876543210",
        nvme_swap_gib=64 if role == "trn1" else 0, dlami_venv_glob="/opt/aws_neuronx_venv_pytorch_*",
        hf_token_secret="neuronpipe/hf-token"))


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("role", ["trn1", "inf2"])
def test_rendered_scripts_parse_under_bash_and_dash(tmp_path, role):
    scripts = _scripts(role)
    for name in ("bootstrap", "per_boot", "sync"):
        text = getattr(scripts, name)
        assert text.startswith("#!/bin/bash\n"), name
        assert "@@" not in text
        path = tmp_path / name
        path.write_text(text)
        shells = ["bash"] + (["dash"] if name != "bootstrap" and shutil.which("dash") else [])
        for shell in shells:  # bootstrap (user data) uses >(tee): cloud-init execs it, the kernel reads #!/bin/bash
            proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, (name, shell, proc.stderr)
        # `sh file` hands over to bash before any bash-only line runs
        assert _code_lines(text)[0] == '[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"', name


def test_box_paths_sit_under_the_box_root_and_imds_is_overridable():
    scripts = _scripts("inf2")
    for name in ("bootstrap", "per_boot", "sync"):
        code = "\n".join(_code_lines(getattr(scripts, name)))
        assert BARE_BOX_PATH.findall(code) == [], name
        for line in code.splitlines():
            if "169.254.169.254" in line:
                assert "${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}" in line, line
    per_boot = "\n".join(_code_lines(scripts.per_boot))
    assert 'ROOT="${NEURONPIPE_BOX_ROOT:-}"' in per_boot and '"$IMDS/latest/api/token"' in per_boot
    assert '[ -n "$ROOT" ] || shutdown' in scripts.bootstrap  # a sandbox never shuts its host down


def test_per_boot_removes_its_marker_first_and_writes_it_last():
    lines = _code_lines(_scripts("trn1").per_boot)
    assert 'BOOT_DONE="$ROOT/run/neuronpipe/boot.done"' in lines
    remove = lines.index('rm -f "$BOOT_DONE"')
    assert remove < next(i for i, line in enumerate(lines) if line.startswith("exec >>"))
    assert lines[-2] == 'mv "$BOOT_DONE.new" "$BOOT_DONE"' and lines[-1].startswith("echo ")
    assert BOOT_DONE_PATH == "run/neuronpipe/boot.done"


def _fake_aws(bin_dir: Path, harness_zip: Path, calls: Path) -> None:
    """`aws` answering the two calls neuronpipe-sync makes, recording each call."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    aws = bin_dir / "aws"
    aws.write_text(f"""#!/bin/sh
echo "$*" >> "{calls}"
case "$1 $2" in
  "ssm get-parameter") echo "{HARNESS_URI}" ;;
  "s3 cp") for last; do :; done; cp "{harness_zip}" "$last" ;;
  *) echo "fake aws: unexpected call: $*" >&2; exit 2 ;;
esac
""")
    aws.chmod(0o755)


def _box(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    root = tmp_path / "box"
    staged = stage_harness(tmp_path / "staged", sha="feedface" * 5)
    harness_zip = tmp_path / "harness.zip"
    with zipfile.ZipFile(harness_zip, "w") as zf:  # the CDK asset: the folder's contents at the zip root
        for f in sorted(staged.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(staged))
    sync = root / SYNC_PATH
    sync.parent.mkdir(parents=True)
    sync.write_text(_scripts("trn1").sync)
    sync.chmod(0o755)
    calls = tmp_path / "aws-calls.txt"
    _fake_aws(tmp_path / "bin", harness_zip, calls)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "NEURONPIPE_BOX_ROOT": str(root), "NEURONPIPE_SYNC_SKIP_REQUIREMENTS": "1",
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(var, None)
    return root, env, calls


def test_sync_waits_for_the_per_boot_marker_then_fails_clearly(tmp_path):
    root, env, calls = _box(tmp_path)
    proc = subprocess.run(["/bin/sh", str(root / SYNC_PATH)], env={**env, "NEURONPIPE_BOOT_WAIT_S": "1"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("neuronpipe-sync: per-boot setup not finished after 1s")
    assert not calls.exists()  # nothing synced before the boot setup finished


def test_sync_installs_the_harness_into_the_box_venv_offline(tmp_path):
    """neuronpipe-sync run by /bin/sh, as the SSM agent would: parameter read, `aws s3 cp` of the zip,
    unzip, `pip install --no-deps --no-build-isolation --no-index` into the box venv, env files.
    The box venv sees this test venv's packages (pip, setuptools) through a .pth path line, as the
    rehearsal's boxes do; box-requirements.txt is skipped (NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1)."""
    root, env, calls = _box(tmp_path)
    (root / BOOT_DONE_PATH).parent.mkdir(parents=True)
    (root / BOOT_DONE_PATH).write_text("boot-id\n")
    venv = root / "opt/neuronpipe/.venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    box_site = Path(subprocess.run([str(venv / "bin/python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    (box_site / "zz_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    proc = subprocess.run(["/bin/sh", str(root / SYNC_PATH), "--force"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1" in proc.stdout
    assert f"harness installed: {HARNESS_URI} ({'feedface' * 5})" in proc.stdout
    recorded = calls.read_text().splitlines()
    assert recorded[0].startswith(f"ssm get-parameter --region us-west-2 --name {HARNESS_PARAM}")
    assert recorded[1].startswith("s3 cp") and HARNESS_URI in recorded[1]
    # the harness is installed in the box venv, not read from this checkout or this venv
    where = subprocess.run([str(venv / "bin/python"), "-c", "import agents, os; print(agents.__file__); "
                            "print(os.environ.get('NEURONPIPE_HARNESS_SHA'))"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout.split()
    assert Path(where[0]).is_relative_to(venv), where
    assert where[1] == "feedface" * 5  # the .pth read <root>/etc/neuronpipe/harness.env
    assert (root / "opt/neuronpipe/harness/HARNESS_SHA").read_text().strip() == "feedface" * 5
    assert (root / "opt/neuronpipe/installed-uri").read_text().strip() == HARNESS_URI
    assert (root / "etc/neuronpipe/harness.env").read_text() == f"NEURONPIPE_HARNESS_SHA={'feedface' * 5}\n"
    again = subprocess.run(["/bin/sh", str(root / SYNC_PATH)], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stdout.startswith(f"harness up to date: {HARNESS_URI}")


def test_render_paths_are_the_box_paths():
    assert PER_BOOT_PATH in _scripts().bootstrap and SYNC_PATH in _scripts().bootstrap
