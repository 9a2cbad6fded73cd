"""User data for the boxes, rendered from the shell scripts beside this module.

``@@NAME@@`` placeholders are filled from :class:`BoxUserDataValues`; a placeholder without a
value, or a value without a placeholder anywhere, fails (a typo never ships a literal ``@@X@@``).
Values may be CDK tokens (bucket name, volume ids): CDK resolves them into ``Fn::Join``.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLACEHOLDER = re.compile(r"@@([A-Z0-9_]+)@@")
UV_VERSION = "0.13.9"  # bootstraps a CPython for the harness where the DLAMI's python3 is < 3.11
HARNESS_PYTHON = "3.12"
USER_DATA_LIMIT_BYTES = 16 * 1024  # EC2 limit (before base64)


class UserDataError(ValueError):
    """A user data template and its values disagree (the message names the placeholders)."""


@dataclass(frozen=True)
class BoxUserDataValues:
    box_role: str
    region: str
    results_uri: str
    harness_param: str
    cache_volume_id: str
    swap_volume_id: str  # "" when the box has no EBS swap
    nvme_swap_gib: int  # 0 when the box has no instance-store swap
    dlami_venv_glob: str
    hf_token_secret: str
    uv_version: str = UV_VERSION
    harness_python: str = HARNESS_PYTHON


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``@@NAME@@``; unknown or unused names fail."""
    used = set(PLACEHOLDER.findall(template))
    missing = used - set(values)
    if missing:
        raise UserDataError(f"no value for placeholder(s): {', '.join(sorted(missing))}; "
                            f"given: {', '.join(sorted(values))}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _read(name: str) -> str:
    return (HERE / name).read_text()


@dataclass(frozen=True)
class BoxScripts:
    """The rendered scripts, as the box holds them (paths relative to ``$NEURONPIPE_BOX_ROOT``)."""

    bootstrap: str  # the user data (first boot); embeds the two below
    per_boot: str  # /var/lib/cloud/scripts/per-boot/10-neuronpipe.sh
    sync: str  # /usr/local/bin/neuronpipe-sync


PER_BOOT_PATH = "var/lib/cloud/scripts/per-boot/10-neuronpipe.sh"
SYNC_PATH = "usr/local/bin/neuronpipe-sync"
BOOT_DONE_PATH = "run/neuronpipe/boot.done"


def render_box_scripts(values: BoxUserDataValues) -> BoxScripts:
    """Every box script with its placeholders filled (the rehearsal runs these as they are)."""
    flat = {k.upper(): str(v) for k, v in asdict(values).items()}
    per_boot = fill(_read("per_boot.sh"), flat).rstrip("\n")
    sync = fill(_read("neuronpipe_sync.sh"), flat).rstrip("\n")
    all_values = {**flat, "PER_BOOT_SCRIPT": per_boot, "SYNC_SCRIPT": sync}
    text = fill(_read("bootstrap.sh"), all_values)
    templates = _read("per_boot.sh") + _read("neuronpipe_sync.sh") + _read("bootstrap.sh")
    unused = set(flat) - set(PLACEHOLDER.findall(templates))
    if unused:
        raise UserDataError(f"value(s) used by no template: {', '.join(sorted(unused))}")
    return BoxScripts(text, per_boot + "\n", sync + "\n")


def render_box_user_data(values: BoxUserDataValues) -> str:
    """The first-boot script with the per-boot and sync scripts embedded."""
    return render_box_scripts(values).bootstrap
