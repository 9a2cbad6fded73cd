"""The box scripts: the first-boot user data, and the scripts every harness sync reinstalls.

EC2 runs user data once, at an instance's first boot; a changed user data never runs again on a box that
exists. So the user data (``bootstrap.sh``) holds only what is fixed for the box's life, and the scripts that
do the work ship in the harness zip, where a redeploy changes them:

* ``bootstrap.sh``, the user data. ``@@NAME@@`` placeholders filled from :class:`BoxUserDataValues`, values that
  may be CDK tokens (bucket name, volume ids: CDK resolves them into ``Fn::Join``). It writes them ONCE to
  ``/etc/neuronpipe/box.conf``, installs the box scripts from the harness zip, runs the per-boot setup and the
  first sync, tags the instance ``neuronpipe:bootstrap=done`` and stops it.
* the box scripts (:data:`BOX_SCRIPTS`: per-boot setup, ``neuronpipe-sync``, the agent and CLI wrappers):
  value-free templates that read ``box.conf`` when they run. :func:`render_box_scripts` renders them at BUNDLE
  time (only bundle-time constants: the uv version, the harness Python) and :func:`stage_box_scripts` puts
  them into the harness under ``box/<box path>``, beside ``box/install.sh``, the installer: it writes each to a
  temp file next to its target and renames it over it (bash reads a running script as it goes: the running
  ``neuronpipe-sync`` keeps reading the file it opened, never a rewritten one) and records their SHA-256 in
  ``/etc/neuronpipe/box-scripts.sha256``, which the provenance lane reports. ``neuronpipe-sync`` runs the
  installer of every harness it installs.

A placeholder without a value, or a value without a placeholder, fails (a typo never ships a literal
``@@X@@``).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from control_plane.lean import BOOTSTRAP_DONE, TAG_BOOTSTRAP as BOOTSTRAP_TAG

HERE = Path(__file__).resolve().parent
PLACEHOLDER = re.compile(r"@@([A-Z0-9_]+)@@")
UV_VERSION = "0.13.9"  # bootstraps a CPython for the harness where the DLAMI's python3 is < 3.11
HARNESS_PYTHON = "3.12"
USER_DATA_LIMIT_BYTES = 16 * 1024  # EC2 limit (before base64)

# Box paths, relative to the box root ($NEURONPIPE_BOX_ROOT, empty on a box).
PER_BOOT_PATH = "var/lib/cloud/scripts/per-boot/10-neuronpipe.sh"
SYNC_PATH = "usr/local/bin/neuronpipe-sync"
AGENT_PATH = "usr/local/bin/neuronpipe-agent"
CLI_PATH = "usr/local/bin/neuronpipe"
BOOT_DONE_PATH = "run/neuronpipe/boot.done"
BOX_CONF_PATH = "etc/neuronpipe/box.conf"  # the box's values, written once by the user data
BOX_SCRIPTS_MANIFEST_PATH = "etc/neuronpipe/box-scripts.sha256"  # "<sha256>  /<box path>" per installed script
# box path -> template beside this module; installed from the harness zip at every sync
BOX_SCRIPTS = {
    PER_BOOT_PATH: "per_boot.sh",
    SYNC_PATH: "neuronpipe_sync.sh",
    AGENT_PATH: "neuronpipe_agent.sh",
    CLI_PATH: "neuronpipe_cli.sh",
}
HARNESS_BOX_DIR = "box"  # inside the harness: box/<box path> and box/install.sh
INSTALLER = "install.sh"


class UserDataError(ValueError):
    """A user data template and its values disagree (the message names the placeholders)."""


@dataclass(frozen=True)
class BoxUserDataValues:
    """What is fixed for a box's life: written by the user data into ``box.conf`` (upper-cased names)."""

    box_role: str
    region: str
    results_uri: str
    harness_param: str
    cache_volume_id: str
    swap_volume_id: str  # "" when the box has no EBS swap
    nvme_swap_gib: int  # 0 when the box has no instance-store swap
    dlami_venv_glob: str
    hf_token_secret: str


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``@@NAME@@``; unknown or unused names fail."""
    used = set(PLACEHOLDER.findall(template))
    missing = used - set(values)
    if missing:
        raise UserDataError(f"no value for placeholder(s): {', '.join(sorted(missing))}; "
                            f"given: {', '.join(sorted(values))}")
    unused = set(values) - used
    if unused:
        raise UserDataError(f"value(s) used by no placeholder: {', '.join(sorted(unused))}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _read(name: str) -> str:
    return (HERE / name).read_text()


def box_conf(values: BoxUserDataValues) -> str:
    """``/etc/neuronpipe/box.conf``: ``NAME='value'`` lines the box scripts source (values never hold a quote)."""
    lines = []
    for name, value in asdict(values).items():
        text = str(value)
        if "'" in text or "\n" in text:
            raise UserDataError(f"box.conf value {name}={text!r}: a quote or newline cannot be written there")
        lines.append(f"{name.upper()}='{text}'")
    return "\n".join(lines)


def render_box_user_data(values: BoxUserDataValues) -> str:
    """The first-boot script: the box's values for ``box.conf``, and the steps that install the rest."""
    text = fill(_read("bootstrap.sh"), {
        "BOX_ROLE": values.box_role, "BOX_CONF": box_conf(values), "BOX_CONF_PATH": BOX_CONF_PATH,
        "HARNESS_BOX_DIR": HARNESS_BOX_DIR, "INSTALLER": INSTALLER, "PER_BOOT_PATH": PER_BOOT_PATH,
        "SYNC_PATH": SYNC_PATH, "AGENT_PATH": AGENT_PATH, "BOOTSTRAP_TAG": BOOTSTRAP_TAG,
        "BOOTSTRAP_DONE": BOOTSTRAP_DONE})
    if len(text.encode()) > USER_DATA_LIMIT_BYTES:
        raise UserDataError(f"user data is {len(text.encode())} bytes; EC2 takes {USER_DATA_LIMIT_BYTES}")
    return text


def render_box_scripts() -> dict[str, str]:
    """Every file of the harness's ``box/`` folder, by its path there: the box scripts (by box path) and the
    installer. Only bundle-time constants are filled in; the box's own values come from ``box.conf``."""
    bundle = {"UV_VERSION": UV_VERSION, "HARNESS_PYTHON": HARNESS_PYTHON, "BOX_CONF_PATH": BOX_CONF_PATH,
              "BOOT_DONE_PATH": BOOT_DONE_PATH, "HARNESS_BOX_DIR": HARNESS_BOX_DIR, "INSTALLER": INSTALLER,
              "BOX_SCRIPTS_MANIFEST_PATH": BOX_SCRIPTS_MANIFEST_PATH}
    out = {}
    for path, template in BOX_SCRIPTS.items():
        text = _read(template)
        out[path] = fill(text, {k: v for k, v in bundle.items() if f"@@{k}@@" in text})
    out[INSTALLER] = fill(_read("install.sh"), {
        "BOX_SCRIPT_PATHS": " ".join(shlex.quote(p) for p in BOX_SCRIPTS),
        "BOX_SCRIPTS_MANIFEST_PATH": BOX_SCRIPTS_MANIFEST_PATH})
    return out


def stage_box_scripts(harness_dir: Path) -> Path:
    """Write :func:`render_box_scripts` into ``harness_dir/box/`` (what the zip carries). Returns that folder."""
    dest = Path(harness_dir) / HARNESS_BOX_DIR
    for rel, text in render_box_scripts().items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    return dest
