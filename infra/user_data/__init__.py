"""The box scripts: the first-boot user data, and the scripts every harness sync reinstalls.

EC2 runs user data once, at an instance's first boot; a changed user data never runs again on a box that
exists. So the user data (``bootstrap.sh``) holds only what is fixed for the box's life, and the scripts that
do the work ship in the harness zip, where a redeploy changes them:

* ``bootstrap.sh``, the user data. ``@@NAME@@`` placeholders filled from :class:`BoxUserDataValues`, values that
  may be CDK tokens (bucket name, volume ids: CDK resolves them into ``Fn::Join``). It writes them ONCE to
  ``/etc/neuronpipe/box.conf``, installs the box scripts from the harness zip, runs the per-boot setup and the
  first sync, tags the instance ``neuronpipe:bootstrap=done`` and stops it.
* ``ephemeral.sh``, the user data of an EPHEMERAL box (a run matrix's cell, launched from the fleet's launch
  template of its type and terminated at the cell's end): :class:`EphemeralBoxUserDataValues`. The same box.conf
  (no volumes: the compile cache sits on the root disk; plus ``BACKEND``), the same box scripts; for a CUDA box it
  first creates the serving venv and installs the pinned serving stack into it. It syncs the harness, then runs
  the per-boot setup last, whose marker (:data:`BOOT_DONE_PATH`) tells the state machine's sync that the first
  boot is done. It never stops or shuts the instance down (shutdown would terminate it) and never tags it.
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

from control_plane.lean import BOOTSTRAP_DONE
from control_plane.lean import TAG_BOOTSTRAP as BOOTSTRAP_TAG

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
EPHEMERAL_TEMPLATE = "ephemeral.sh"  # the user data of the fleet's ephemeral boxes
# What both first-boot scripts share: a line @@NAME@@ in either is this file's text after its first blank line (the
# fragment's own comment stays out of the user data)
FRAGMENTS = {"FIRST_BOOT_HEAD": "first_boot_head.sh", "INSTALL_BOX_SCRIPTS": "install_box_scripts.sh"}
# what a pinned box's EXIT trap does besides recording the exit: shut the box down after its first boot (a
# sandbox never does); an ephemeral box's does nothing more (a shutdown would terminate it)
PINNED_ON_EXIT = '; [ -n "$ROOT" ] || shutdown -h +1 "neuronpipe first boot done (rc=$rc)"'


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
        raise UserDataError(
            f"no value for placeholder(s): {', '.join(sorted(missing))}; given: {', '.join(sorted(values))}"
        )
    unused = set(values) - used
    if unused:
        raise UserDataError(f"value(s) used by no placeholder: {', '.join(sorted(unused))}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _read(name: str) -> str:
    return (HERE / name).read_text()


def _first_boot_template(name: str) -> str:
    """A first-boot script with its shared fragments (:data:`FRAGMENTS`) inlined, their own comments left out."""
    text = _read(name)
    for key, fragment in FRAGMENTS.items():
        text = text.replace(f"@@{key}@@\n", _read(fragment).split("\n\n", 1)[1])
    return text


def box_conf(values: BoxUserDataValues, **extra: str) -> str:
    """``/etc/neuronpipe/box.conf``: ``NAME='value'`` lines the box scripts source (values never hold a quote);
    ``extra`` adds names a pinned box's conf does not carry (an ephemeral box's ``backend``)."""
    lines = []
    for name, value in {**asdict(values), **extra}.items():
        text = str(value)
        if "'" in text or "\n" in text:
            raise UserDataError(f"box.conf value {name}={text!r}: a quote or newline cannot be written there")
        lines.append(f"{name.upper()}='{text}'")
    return "\n".join(lines)


def render_box_user_data(values: BoxUserDataValues) -> str:
    """The first-boot script: the box's values for ``box.conf``, and the steps that install the rest."""
    text = fill(
        _first_boot_template("bootstrap.sh"),
        {
            "BOX_ROLE": values.box_role,
            "BOX_CONF": box_conf(values),
            "BOX_CONF_PATH": BOX_CONF_PATH,
            "ON_EXIT": PINNED_ON_EXIT,
            "HARNESS_BOX_DIR": HARNESS_BOX_DIR,
            "INSTALLER": INSTALLER,
            "PER_BOOT_PATH": PER_BOOT_PATH,
            "SYNC_PATH": SYNC_PATH,
            "AGENT_PATH": AGENT_PATH,
            "BOOTSTRAP_TAG": BOOTSTRAP_TAG,
            "BOOTSTRAP_DONE": BOOTSTRAP_DONE,
        },
    )
    if len(text.encode()) > USER_DATA_LIMIT_BYTES:
        raise UserDataError(f"user data is {len(text.encode())} bytes; EC2 takes {USER_DATA_LIMIT_BYTES}")
    return text


@dataclass(frozen=True)
class EphemeralBoxUserDataValues:
    """An ephemeral box's values: no compile-cache or swap volume, its backend, and the serving stack its first boot
    installs (a CUDA box: ``serving_installs`` into ``serving_venv``, which is then its ``dlami_venv_glob``)."""

    box_role: str  # "inf2" | "trn1" | "cuda"
    backend: str  # "neuron" | "cuda": NEURONPIPE_BACKEND of the box
    region: str
    results_uri: str
    harness_param: str
    dlami_venv_glob: str
    hf_token_secret: str
    serving_venv: str = ""  # created by the first boot when serving_installs is set
    serving_installs: tuple[tuple[str, str], ...] = ()  # (distribution, exact version), pip-installed with ==
    root_swap_gib: int = 0  # a swap file on the root disk (a small type: no swap volume of its own)

    def box_values(self) -> BoxUserDataValues:
        return BoxUserDataValues(
            box_role=self.box_role,
            region=self.region,
            results_uri=self.results_uri,
            harness_param=self.harness_param,
            cache_volume_id="",
            swap_volume_id="",
            nvme_swap_gib=0,
            dlami_venv_glob=self.dlami_venv_glob,
            hf_token_secret=self.hf_token_secret,
        )


VENV_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")
REQUIREMENT_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _serving_install(values: EphemeralBoxUserDataValues) -> tuple[str, str]:
    """The CUDA serving stack's lines (a venv of its own, exact pins) and the header's summary of them."""
    if not values.serving_installs:
        return (
            "# No serving stack to install: the DLAMI's own venv holds it (DLAMI_VENV_GLOB of box.conf).",
            "keeps the DLAMI's own venvs",
        )
    venv = values.serving_venv
    if not VENV_PATH.fullmatch(venv) or venv != values.dlami_venv_glob:
        raise UserDataError(
            f"serving venv {venv!r}: an absolute path without spaces or quotes, and the box's "
            f"dlami_venv_glob ({values.dlami_venv_glob!r}) so NEURONPIPE_DLAMI_VENV names it"
        )
    bad = [
        f"{n}=={v}"
        for n, v in values.serving_installs
        if not (REQUIREMENT_PART.fullmatch(n) and REQUIREMENT_PART.fullmatch(v))
    ]
    if bad:
        raise UserDataError(f"serving installs {bad}: expected a distribution name and an exact version")
    pins = " ".join(shlex.quote(f"{n}=={v}") for n, v in values.serving_installs)
    lines = [
        "# The serving stack: a venv of its own with exact pins (pipeline.box_stack CUDA_SERVING_INSTALLS); the",
        "# per-boot setup finds it through DLAMI_VENV_GLOB and records it as NEURONPIPE_DLAMI_VENV. python3-venv comes",
        "# from apt where the image lacks it (the harness venv needs it too).",
        f'SERVING_VENV="$ROOT{venv}"',
        'if [ -z "$ROOT" ] && ! python3 -c "import ensurepip" 2>/dev/null; then  # never in a sandbox',
        "  apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y "
        "python3-venv",
        "fi",
        '[ -x "$SERVING_VENV/bin/python" ] || python3 -m venv "$SERVING_VENV"',
        'if [ "${NEURONPIPE_SYNC_SKIP_REQUIREMENTS:-}" = "1" ]; then',
        f'  echo "serving stack not installed (NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1, the rehearsal only): {pins}"',
        "else",
        f'  "$SERVING_VENV/bin/python" -m pip install -q --disable-pip-version-check {pins}',
        "fi",
    ]
    return "\n".join(lines), f"creates {venv} and installs {pins} into it"


def render_ephemeral_user_data(values: EphemeralBoxUserDataValues) -> str:
    """The user data of an ephemeral box (the fleet's launch templates): see the module docstring."""
    install, summary = _serving_install(values)
    text = fill(
        _first_boot_template(EPHEMERAL_TEMPLATE),
        {
            "BOX_ROLE": values.box_role,
            "ON_EXIT": "",
            "BOX_CONF": box_conf(values.box_values(), backend=values.backend, root_swap_gib=str(values.root_swap_gib)),
            "BOX_CONF_PATH": BOX_CONF_PATH,
            "BOOT_DONE_PATH": BOOT_DONE_PATH,
            "HARNESS_BOX_DIR": HARNESS_BOX_DIR,
            "INSTALLER": INSTALLER,
            "PER_BOOT_PATH": PER_BOOT_PATH,
            "SYNC_PATH": SYNC_PATH,
            "SERVING_INSTALL": install,
            "SERVING_SUMMARY": summary,
        },
    )
    if len(text.encode()) > USER_DATA_LIMIT_BYTES:
        raise UserDataError(f"user data is {len(text.encode())} bytes; EC2 takes {USER_DATA_LIMIT_BYTES}")
    return text


def render_box_scripts() -> dict[str, str]:
    """Every file of the harness's ``box/`` folder, by its path there: the box scripts (by box path) and the
    installer. Only bundle-time constants are filled in; the box's own values come from ``box.conf``."""
    bundle = {
        "UV_VERSION": UV_VERSION,
        "HARNESS_PYTHON": HARNESS_PYTHON,
        "BOX_CONF_PATH": BOX_CONF_PATH,
        "BOOT_DONE_PATH": BOOT_DONE_PATH,
        "HARNESS_BOX_DIR": HARNESS_BOX_DIR,
        "INSTALLER": INSTALLER,
        "BOX_SCRIPTS_MANIFEST_PATH": BOX_SCRIPTS_MANIFEST_PATH,
    }
    out = {}
    for path, template in BOX_SCRIPTS.items():
        text = _read(template)
        out[path] = fill(text, {k: v for k, v in bundle.items() if f"@@{k}@@" in text})
    out[INSTALLER] = fill(
        _read("install.sh"),
        {
            "BOX_SCRIPT_PATHS": " ".join(shlex.quote(p) for p in BOX_SCRIPTS),
            "BOX_SCRIPTS_MANIFEST_PATH": BOX_SCRIPTS_MANIFEST_PATH,
        },
    )
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
