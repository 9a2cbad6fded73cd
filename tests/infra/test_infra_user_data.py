"""The box scripts (INTERFACES A): the first-boot user data and the scripts the harness zip ships. They parse
under bash and dash, keep box paths under NEURONPIPE_BOX_ROOT, read the box's values from box.conf, and run for
real under /bin/sh in a sandbox root with a fake `aws`: the first boot installs everything from the zip, and a
LATER deploy's changed scripts reach the already-booted box at its next sync (EC2 never re-runs user data)."""

from __future__ import annotations

import hashlib
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
from infra.user_data import (
    AGENT_PATH,
    BOOT_DONE_PATH,
    BOX_CONF_PATH,
    BOX_SCRIPTS,
    BOX_SCRIPTS_MANIFEST_PATH,
    CLI_PATH,
    HARNESS_BOX_DIR,
    INSTALLER,
    PER_BOOT_PATH,
    SYNC_PATH,
    BoxUserDataValues,
    EphemeralBoxUserDataValues,
    UserDataError,
    box_conf,
    render_box_scripts,
    render_box_user_data,
    render_ephemeral_user_data,
)

HARNESS_PARAM = "/neuronpipe/harness/uri"
HARNESS_URI = "s3://cdk-assets-bucket/0123abcd.zip"
BOX_PATHS = (
    "opt/neuronpipe",
    "etc/neuronpipe",
    "usr/local/bin/neuronpipe",
    "var/lib/cloud/scripts/per-boot",
    "var/log/neuronpipe",
    "var/lib/neuronpipe",
    "var/cache/neuronpipe",
    "run/neuronpipe",
)
# a box path written without the root in front: "/opt/neuronpipe" not preceded by $ROOT, $R or ${...}
BARE_BOX_PATH = re.compile(r"(?<![\w}$])(?<!\$ROOT)(?<!\$R)/(" + "|".join(map(re.escape, BOX_PATHS)) + r")")


def _values(role: str = "trn1") -> BoxUserDataValues:
    return BoxUserDataValues(
        box_role=role,
        region="us-west-2",
        results_uri="s3://b/results",
        harness_param=HARNESS_PARAM,
        cache_volume_id="vol-0123456789abcdef0",
        swap_volume_id="" if role == "trn1" else "vol-0fedcba9876543210",
        nvme_swap_gib=64 if role == "trn1" else 0,
        dlami_venv_glob="/opt/aws_neuronx_venv_pytorch_*",
        hf_token_secret="neuronpipe/hf-token",
    )


def _all_scripts(role: str = "trn1") -> dict[str, str]:
    return {"user-data": render_box_user_data(_values(role)), **render_box_scripts()}


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("role", ["trn1", "inf2"])
def test_rendered_scripts_parse_under_bash_and_dash(tmp_path, role):
    for name, text in _all_scripts(role).items():
        assert text.startswith("#!/bin/bash\n"), name
        assert "@@" not in text, name
        path = tmp_path / "script"
        path.write_text(text)
        shells = ["bash"] + (["dash"] if name != "user-data" and shutil.which("dash") else [])
        for shell in shells:  # the user data uses >(tee): cloud-init execs it, the kernel reads #!/bin/bash
            proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, (name, shell, proc.stderr)
        # `sh file` hands over to bash before any bash-only line runs
        assert _code_lines(text)[0] == '[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"', name


def test_box_paths_sit_under_the_box_root_and_imds_is_overridable():
    scripts = _all_scripts("inf2")
    for name, text in scripts.items():
        code = "\n".join(_code_lines(text))
        assert BARE_BOX_PATH.findall(code) == [], name
        for line in code.splitlines():
            if "169.254.169.254" in line:
                assert "${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}" in line, line
    per_boot = "\n".join(_code_lines(scripts[PER_BOOT_PATH]))
    assert 'ROOT="${NEURONPIPE_BOX_ROOT:-}"' in per_boot and '"$IMDS/latest/api/token"' in per_boot
    assert '[ -n "$ROOT" ] || shutdown' in scripts["user-data"]  # a sandbox never shuts its host down


def test_per_boot_removes_its_marker_first_and_writes_it_last():
    lines = _code_lines(render_box_scripts()[PER_BOOT_PATH])
    assert 'BOOT_DONE="$ROOT/run/neuronpipe/boot.done"' in lines
    remove = lines.index('rm -f "$BOOT_DONE"')
    assert remove < next(i for i, line in enumerate(lines) if line.startswith("exec >>"))
    assert lines[-2] == 'mv "$BOOT_DONE.new" "$BOOT_DONE"' and lines[-1].startswith("echo ")
    assert BOOT_DONE_PATH == "run/neuronpipe/boot.done"


def test_the_box_scripts_are_value_free_and_the_user_data_carries_the_values_once():
    """Nothing deploy-specific is baked into a script of the zip (a box's values would then be another box's):
    the user data writes them once to box.conf, and only the user data holds them."""
    values = _values("inf2")
    ud = render_box_user_data(values)
    conf = box_conf(values)
    assert conf in ud and f"/{BOX_CONF_PATH}" in ud
    assert "BOX_ROLE='inf2'" in conf and "SWAP_VOLUME_ID='vol-0fedcba9876543210'" in conf
    for path, text in render_box_scripts().items():
        for value in (
            "vol-0123456789abcdef0",
            "vol-0fedcba9876543210",
            "s3://b/results",
            HARNESS_PARAM,
            "neuronpipe/hf-token",
        ):
            assert value not in text, (path, value)
    # the scripts the user data used to embed are not in it any more: it installs them from the zip
    assert "pip install" not in ud and "neuronpipe_box_env.pth" not in ud
    assert f"{HARNESS_BOX_DIR}/{INSTALLER}" in ud and len(ud.encode()) < 16 * 1024
    with pytest.raises(UserDataError, match="quote"):
        box_conf(BoxUserDataValues(**{**values.__dict__, "hf_token_secret": "it's"}))


def test_the_harness_carries_the_box_scripts_and_their_installer(tmp_path):
    staged = stage_harness(tmp_path / "h", sha="abc")
    for path in BOX_SCRIPTS:
        assert (staged / HARNESS_BOX_DIR / path).read_text() == render_box_scripts()[path]
    assert (staged / HARNESS_BOX_DIR / INSTALLER).is_file()
    assert set(BOX_SCRIPTS) == {PER_BOOT_PATH, SYNC_PATH, AGENT_PATH, CLI_PATH}


# --- the scripts run in a sandbox box ------------------------------------------------------------------------


def _zip(staged: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:  # the CDK asset: the folder's contents at the zip root
        for f in sorted(staged.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(staged))
    return dest


def _fake_aws(bin_dir: Path, assets: Path, calls: Path, current: Path) -> None:
    """`aws` answering what the box scripts call, recording each call: the harness parameter's value is the
    content of ``current``; `s3 cp s3://cdk-assets-bucket/<name>` copies ``assets/<name>``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    aws = bin_dir / "aws"
    aws.write_text(f"""#!/bin/sh
echo "$*" >> "{calls}"
case "$1 $2" in
  "ssm get-parameter") cat "{current}" ;;
  "s3 cp") for last; do :; done; src=$(echo "$*" | grep -o 's3://[^ ]*'); cp "{assets}/${{src##*/}}" "$last" ;;
  "ec2 create-tags") ;;
  *) echo "fake aws: unexpected call: $*" >&2; exit 2 ;;
esac
""")
    aws.chmod(0o755)


class SandboxBox:
    """A box root with a venv seeing this test venv's packages (as the rehearsal's boxes do), a fake `aws`
    and a harness bucket that "deploys" publish to."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.root = tmp_path / "box"
        self.assets = tmp_path / "assets"
        self.assets.mkdir()
        self.calls = tmp_path / "aws-calls.txt"
        self.current = tmp_path / "current-uri"
        _fake_aws(tmp_path / "bin", self.assets, self.calls, self.current)
        self.env = {
            **os.environ,
            "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "NEURONPIPE_BOX_ROOT": str(self.root),
            "NEURONPIPE_SYNC_SKIP_REQUIREMENTS": "1",
            "NEURONPIPE_IMDS_ENDPOINT": "http://127.0.0.1:9",
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": "",
        }
        for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            self.env.pop(var, None)

    def deploy(self, name: str, sha: str, edit=None) -> str:
        """Publish a harness zip (``edit(staged_dir)`` changes it first) and point the parameter at it."""
        staged = stage_harness(self.tmp / f"staged-{name}", sha=sha)
        if edit:
            edit(staged)
        _zip(staged, self.assets / f"{name}.zip")
        uri = f"s3://cdk-assets-bucket/{name}.zip"
        self.current.write_text(uri + "\n")
        return uri

    def venv(self) -> Path:
        venv = self.root / "opt/neuronpipe/.venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        site = Path(
            subprocess.run(
                [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        (site / "zz_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        return venv

    def run(self, path: str, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["/bin/sh", str(self.root / path), *args],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _sync_only_box(tmp_path: Path) -> SandboxBox:
    """A box past its first boot as far as neuronpipe-sync needs: box.conf and the sync script in place."""
    box = SandboxBox(tmp_path)
    (box.root / BOX_CONF_PATH).parent.mkdir(parents=True)
    (box.root / BOX_CONF_PATH).write_text(box_conf(_values("trn1")) + "\n")
    sync = box.root / SYNC_PATH
    sync.parent.mkdir(parents=True)
    sync.write_text(render_box_scripts()[SYNC_PATH])
    sync.chmod(0o755)
    return box


def test_sync_waits_for_the_per_boot_marker_then_fails_clearly(tmp_path):
    box = _sync_only_box(tmp_path)
    proc = box.run(SYNC_PATH, timeout=60, NEURONPIPE_BOOT_WAIT_S="1")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("neuronpipe-sync: per-boot setup not finished after 1s")
    assert not box.calls.exists()  # nothing synced before the boot setup finished


def test_sync_without_box_conf_fails_naming_it(tmp_path):
    box = _sync_only_box(tmp_path)
    (box.root / BOX_CONF_PATH).unlink()
    proc = box.run(SYNC_PATH, timeout=60)
    assert proc.returncode == 1 and f"{BOX_CONF_PATH} missing" in proc.stderr
    assert not box.calls.exists()


def test_sync_installs_the_harness_into_the_box_venv_offline(tmp_path):
    """neuronpipe-sync run by /bin/sh, as the SSM agent would: parameter read, `aws s3 cp` of the zip,
    unzip, `pip install --no-deps --no-build-isolation --no-index` into the box venv, env files."""
    box = _sync_only_box(tmp_path)
    uri = box.deploy("first", "feedface" * 5)
    (box.root / BOOT_DONE_PATH).parent.mkdir(parents=True)
    (box.root / BOOT_DONE_PATH).write_text("boot-id\n")
    venv = box.venv()

    proc = box.run(SYNC_PATH, "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1" in proc.stdout
    assert f"harness installed: {uri} ({'feedface' * 5})" in proc.stdout
    recorded = box.calls.read_text().splitlines()
    assert recorded[0].startswith(f"ssm get-parameter --region us-west-2 --name {HARNESS_PARAM}")
    assert recorded[1].startswith("s3 cp") and uri in recorded[1]
    # the harness is installed in the box venv, not read from this checkout or this venv
    where = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import agents, os; print(agents.__file__); print(os.environ.get('NEURONPIPE_HARNESS_SHA'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=box.env,
    ).stdout.split()
    assert Path(where[0]).is_relative_to(venv), where
    assert where[1] == "feedface" * 5  # the .pth read <root>/etc/neuronpipe/harness.env
    assert (box.root / "opt/neuronpipe/harness/HARNESS_SHA").read_text().strip() == "feedface" * 5
    assert (box.root / "opt/neuronpipe/installed-uri").read_text().strip() == uri
    assert (box.root / "etc/neuronpipe/harness.env").read_text().splitlines() == [
        f"NEURONPIPE_HARNESS_SHA={'feedface' * 5}",
        f"NEURONPIPE_BOX_SCRIPTS_MANIFEST={box.root}/{BOX_SCRIPTS_MANIFEST_PATH}",
    ]
    again = box.run(SYNC_PATH, timeout=60)
    assert again.returncode == 0 and again.stdout.startswith(f"harness up to date: {uri}")


def test_sync_refuses_a_harness_without_the_box_lock(tmp_path):
    """The box installs only hash-checked packages: a harness without box-requirements.lock is refused."""
    box = _sync_only_box(tmp_path)
    box.deploy("first", "feedface" * 5, edit=lambda staged: (staged / "box-requirements.lock").unlink(missing_ok=True))
    (box.root / BOOT_DONE_PATH).parent.mkdir(parents=True)
    (box.root / BOOT_DONE_PATH).write_text("boot-id\n")
    box.venv()
    proc = box.run(SYNC_PATH, "--force", NEURONPIPE_SYNC_SKIP_REQUIREMENTS="")
    assert proc.returncode == 1
    assert "has no box-requirements.lock: the box installs only hash-checked packages" in proc.stderr
    assert not (box.root / "opt/neuronpipe/installed-uri").exists()


def test_sync_installs_the_box_lock_with_require_hashes_from_its_index(tmp_path):
    """The lock (infra.box_lock, from a file:// index here) installed into the box venv by neuronpipe-sync; a lock
    whose hash does not match the index's file fails the sync."""
    from infra.box_lock import Target, write_lock
    from tests.infra.fake_index import simple_index, wheel

    files = tmp_path / "index" / "files"
    index = simple_index(tmp_path / "index", [wheel(files, "alpha", "1.0", ("beta",)), wheel(files, "beta", "2.0")])
    reqs, lock = tmp_path / "box-requirements.txt", tmp_path / "box-requirements.lock"
    reqs.write_text("alpha==1.0\n")
    here = "{}.{}".format(*sys.version_info[:2])
    write_lock(
        sys.executable,
        requirements=reqs,
        lock=lock,
        target=Target(sys.executable, version=here),
        default_index=index,
        package_indexes={},
    )
    box = _sync_only_box(tmp_path)
    box.deploy("locked", "feedface" * 5, edit=lambda staged: shutil.copy2(lock, staged / "box-requirements.lock"))
    (box.root / BOOT_DONE_PATH).parent.mkdir(parents=True)
    (box.root / BOOT_DONE_PATH).write_text("boot-id\n")
    venv = box.venv()
    proc = box.run(SYNC_PATH, "--force", NEURONPIPE_SYNC_SKIP_REQUIREMENTS="", PIP_NO_CACHE_DIR="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = Path(
        subprocess.run(
            [str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert (site / "alpha" / "__init__.py").is_file() and (site / "beta" / "__init__.py").is_file()
    # another box, whose lock holds a hash no file of the index has
    first = re.search(r"--hash=sha256:([0-9a-f]{64})", lock.read_text()).group(1)
    tampered = lock.read_text().replace(first, "0" * 64)
    (tmp_path / "other").mkdir()
    other = _sync_only_box(tmp_path / "other")
    other.deploy(
        "tampered", "beefcafe" * 5, edit=lambda staged: (staged / "box-requirements.lock").write_text(tampered)
    )
    (other.root / BOOT_DONE_PATH).parent.mkdir(parents=True)
    (other.root / BOOT_DONE_PATH).write_text("boot-id\n")
    other.venv()
    bad = other.run(SYNC_PATH, "--force", NEURONPIPE_SYNC_SKIP_REQUIREMENTS="", PIP_NO_CACHE_DIR="1")
    assert bad.returncode != 0 and "DO NOT MATCH THE HASHES" in bad.stderr
    assert not (other.root / "opt/neuronpipe/installed-uri").exists()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_first_boot_installs_from_the_zip_and_a_later_deploy_reaches_the_booted_box_at_its_next_sync(tmp_path):
    """Issue 28: the box scripts were written by first-boot user data only, so a fix never reached a box. Now:
    the user data installs them from the harness zip; a second deploy changes two of them (the per-boot setup
    and neuronpipe-sync itself); the already-booted box's next sync (what SyncHarness runs) installs them,
    renaming each into place (the running sync is never rewritten in place), and records their SHA-256; the
    next boot runs the new per-boot setup, the next sync is the new sync."""
    from agents.lanes.provenance import box_script_rows

    box = SandboxBox(tmp_path)
    box.deploy("v1", "1111" * 10)
    box.venv()
    user_data = box.root / "var/lib/cloud/instance/scripts/part-001"
    user_data.parent.mkdir(parents=True)
    user_data.write_text(render_box_user_data(_values("trn1")))
    user_data.chmod(0o755)
    first = subprocess.run([str(user_data)], env=box.env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "bootstrap ok: " + "1111" * 10 in first.stdout
    assert (box.root / BOX_CONF_PATH).read_text().count("BOX_ROLE='trn1'") == 1
    for path, text in render_box_scripts().items():
        if path != INSTALLER:
            assert (box.root / path).read_text() == text, path  # from the zip, as rendered
    calls = box.calls.read_text()
    assert "ec2 create-tags --region us-west-2 --resources unknown --tags Key=neuronpipe:bootstrap,Value=done" in calls

    def fix(staged: Path) -> None:  # what a later commit changes in the box scripts
        per_boot = staged / HARNESS_BOX_DIR / PER_BOOT_PATH
        per_boot.write_text(per_boot.read_text().replace('echo "== per-boot done"', 'echo "== per-boot done (v2)"'))
        sync = staged / HARNESS_BOX_DIR / SYNC_PATH
        sync.write_text(sync.read_text().replace("set -euo pipefail\n", 'set -euo pipefail\necho "sync v2"\n', 1))

    uri2 = box.deploy("v2", "2222" * 10, edit=fix)
    sync_inode = (box.root / SYNC_PATH).stat().st_ino
    second = box.run(SYNC_PATH)  # the next run's SyncHarness, on the box that booted with v1
    assert second.returncode == 0, second.stdout + second.stderr
    assert "sync v2" not in second.stdout  # the running sync was v1's ...
    assert f"harness installed: {uri2} ({'2222' * 10})" in second.stdout  # ... and it ran to its end
    assert (box.root / SYNC_PATH).stat().st_ino != sync_inode  # renamed into place, not rewritten in place
    staged_v2 = tmp_path / "staged-v2" / HARNESS_BOX_DIR
    for path in BOX_SCRIPTS:
        assert _sha(box.root / path) == _sha(staged_v2 / path), path
    manifest = (box.root / BOX_SCRIPTS_MANIFEST_PATH).read_text().splitlines()
    assert sorted(manifest) == sorted(f"{_sha(staged_v2 / p)}  /{p}" for p in BOX_SCRIPTS)

    boot = box.run(PER_BOOT_PATH, timeout=120)  # the next boot
    assert boot.returncode == 0
    assert "== per-boot done (v2)" in (box.root / "var/log/neuronpipe-boot.log").read_text()
    third = box.run(SYNC_PATH, timeout=60)
    assert third.stdout.startswith("sync v2\nharness up to date: " + uri2)

    # the provenance lane reports what is installed
    rows = box_script_rows(
        {
            "NEURONPIPE_BOX_SCRIPTS_MANIFEST": str(box.root / BOX_SCRIPTS_MANIFEST_PATH),
            "NEURONPIPE_BOX_ROOT": str(box.root),
        }
    )
    assert {r["name"]: r["value"] for r in rows} == {f"/{p}": _sha(staged_v2 / p) for p in BOX_SCRIPTS}
    assert all(r["category"] == "box_script" and r["note"] is None for r in rows)
    (box.root / PER_BOOT_PATH).write_text("#!/bin/bash\n# edited by hand\n")
    edited = {
        r["name"]: r
        for r in box_script_rows(
            {
                "NEURONPIPE_BOX_SCRIPTS_MANIFEST": str(box.root / BOX_SCRIPTS_MANIFEST_PATH),
                "NEURONPIPE_BOX_ROOT": str(box.root),
            }
        )
    }[f"/{PER_BOOT_PATH}"]
    assert "changed since sync" in edited["note"]
    assert box_script_rows({})[0]["value"] is None  # off a box: one NULL row with its note


def test_render_paths_are_the_box_paths():
    ud = render_box_user_data(_values())
    assert PER_BOOT_PATH in ud and SYNC_PATH in ud and AGENT_PATH in ud


# --- the ephemeral (fleet) box's user data ---------------------------------------------------------------------------


def _ephemeral_values(backend: str = "cuda") -> EphemeralBoxUserDataValues:
    from pipeline.box_stack import CUDA_SERVING_INSTALLS, CUDA_VENV

    cuda = backend == "cuda"
    return EphemeralBoxUserDataValues(
        box_role="cuda" if cuda else "inf2",
        backend=backend,
        region="us-west-2",
        results_uri="s3://b/results",
        harness_param=HARNESS_PARAM,
        dlami_venv_glob=CUDA_VENV if cuda else "/opt/aws_neuronx_venv_pytorch_*_vllm*",
        hf_token_secret="neuronpipe/hf-token",
        serving_venv=CUDA_VENV if cuda else "",
        serving_installs=tuple(CUDA_SERVING_INSTALLS.items()) if cuda else (),
    )


@pytest.mark.parametrize("backend", ["cuda", "neuron"])
def test_the_ephemeral_user_data_parses_and_keeps_box_paths_under_the_root(tmp_path, backend):
    text = render_ephemeral_user_data(_ephemeral_values(backend))
    assert text.startswith("#!/bin/bash\n") and "@@" not in text and len(text.encode()) < 16 * 1024
    (tmp_path / "ud").write_text(text)
    proc = subprocess.run(["bash", "-n", str(tmp_path / "ud")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    conf = text.split("<<'NEURONPIPE_BOX_CONF'\n", 1)[1].split("\nNEURONPIPE_BOX_CONF\n", 1)[0]
    code = "\n".join(line for line in _code_lines(text) if line not in conf.splitlines())  # box.conf holds values
    assert BARE_BOX_PATH.findall(code) == []
    assert "shutdown" not in code and "create-tags" not in code


def test_the_per_boot_setup_needs_no_compile_cache_volume():
    """An ephemeral box has none (CACHE_VOLUME_ID empty): the cache directories sit on the root disk, at the same
    path (agents.box_env finds the cache through NEURONPIPE_CACHE / NEURON_COMPILE_CACHE_URL either way)."""
    lines = _code_lines(render_box_scripts()[PER_BOOT_PATH])
    guard = lines.index('  if [ -n "$CACHE_VOLUME_ID" ]; then')
    assert lines[guard + 1] == '    dev=$(ebs_device "$CACHE_VOLUME_ID")'
    assert "NEURONPIPE_BACKEND=${BACKEND:-neuron}" in lines  # a pinned box's box.conf has no BACKEND


def test_an_ephemeral_first_boot_installs_everything_and_leaves_the_marker_last(tmp_path):
    """The cuda variant run for real in a sandbox: box.conf with BACKEND, the serving venv created (its pip install
    skipped offline, as the rehearsal does), the harness synced without waiting for the marker, then the per-boot
    setup: /etc/neuronpipe/env names the serving venv as the DLAMI venv and the cuda backend, the cache dirs exist,
    the marker is there. Nothing tags or stops the box; the state machine's sync then finds the harness installed."""
    from pipeline.box_stack import CUDA_VENV

    box = SandboxBox(tmp_path)
    uri = box.deploy("v1", "3333" * 10)
    box.venv()
    user_data = box.root / "var/lib/cloud/instance/scripts/part-001"
    user_data.parent.mkdir(parents=True)
    user_data.write_text(render_ephemeral_user_data(_ephemeral_values("cuda")))
    user_data.chmod(0o755)
    first = subprocess.run([str(user_data)], env=box.env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "serving stack not installed (NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1" in first.stdout
    assert f"harness installed: {uri}" in first.stdout and "bootstrap ok: " + "3333" * 10 in first.stdout
    assert (box.root / CUDA_VENV.lstrip("/") / "bin/python").exists()
    assert (box.root / BOOT_DONE_PATH).is_file()
    env = dict(line.split("=", 1) for line in (box.root / "etc/neuronpipe/env").read_text().splitlines() if line)
    assert env["NEURONPIPE_BACKEND"] == "cuda" and env["NEURONPIPE_BOX_ROLE"] == "cuda"
    assert env["NEURONPIPE_DLAMI_VENV"] == f"{box.root}{CUDA_VENV}"
    assert env["NEURON_COMPILE_CACHE_URL"] == f"{box.root}/var/cache/neuronpipe/neuron-compile-cache"
    assert (box.root / "var/cache/neuronpipe/neuron-compile-cache").is_dir()
    calls = box.calls.read_text()
    assert "create-tags" not in calls and "stop-instances" not in calls
    sync = box.run(SYNC_PATH, timeout=60)  # the state machine's SyncHarness: the marker is there, nothing to do
    assert sync.returncode == 0 and sync.stdout.startswith(f"harness up to date: {uri}")
