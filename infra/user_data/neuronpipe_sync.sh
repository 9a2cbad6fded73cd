#!/bin/bash
# neuronpipe-sync [--force]: install the harness named by the SSM parameter HARNESS_PARAM of
# /@@BOX_CONF_PATH@@ (an s3:// zip published by `cdk deploy`) into /opt/neuronpipe/.venv, its own venv
# beside the DLAMI's, then the box scripts that harness ships (this one among them: box/@@INSTALLER@@
# renames each into place, so this running copy is never rewritten under bash's feet). Waits
# (NEURONPIPE_BOOT_WAIT_S, default 600 s) for the per-boot setup's marker first.
# Box-side versions come from the harness's box-requirements.lock (every package pinned with its hashes,
# setuptools among them: pip install --require-hashes, config and environment ignored, the lock's one index);
# without the lock it refuses. The harness itself is installed --no-deps --no-build-isolation --no-index
# (offline). Same URI as last time: nothing to do. NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1 (the rehearsal only)
# skips the box package install. Box paths are under ${NEURONPIPE_BOX_ROOT:-} (empty on a box).
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -euo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
HOME_DIR="$ROOT/opt/neuronpipe"
VENV="$HOME_DIR/.venv"
ETC="$ROOT/etc/neuronpipe"
CONF="$ROOT/@@BOX_CONF_PATH@@"
BOOT_DONE="$ROOT/@@BOOT_DONE_PATH@@"
if [ ! -f "$CONF" ]; then
  echo "neuronpipe-sync: $CONF missing (the first boot's user data writes it)" >&2
  exit 1
fi
. "$CONF"
wait_s="${NEURONPIPE_BOOT_WAIT_S:-600}"
waited=0
# NEURONPIPE_SYNC_NO_BOOT_WAIT=1: an ephemeral box's first boot syncs BEFORE its per-boot setup (whose marker then
# tells the state machine's sync that the whole first boot is done), so this one does not wait for it.
until [ -f "$BOOT_DONE" ] || [ "${NEURONPIPE_SYNC_NO_BOOT_WAIT:-}" = "1" ]; do
  if [ "$waited" -ge "$wait_s" ]; then
    echo "neuronpipe-sync: per-boot setup not finished after ${wait_s}s (no $BOOT_DONE; see $ROOT/var/log/neuronpipe-boot.log)" >&2
    exit 1
  fi
  sleep 1; waited=$((waited + 1))
done
uri=$(aws ssm get-parameter --region "$REGION" --name "$HARNESS_PARAM" --query Parameter.Value --output text)
if [ "${1:-}" != "--force" ] && [ -f "$HOME_DIR/installed-uri" ] && [ "$(cat "$HOME_DIR/installed-uri")" = "$uri" ]; then
  echo "harness up to date: $uri ($(cat "$HOME_DIR/harness/HARNESS_SHA" 2>/dev/null))"; exit 0
fi
mkdir -p "$HOME_DIR" "$ETC"
if [ ! -x "$VENV/bin/python" ]; then
  if python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    python3 -m venv "$VENV"
  else  # Ubuntu 22.04 ships 3.10: a uv-managed CPython beside the DLAMI's
    python3 -m venv "$HOME_DIR/uv"
    "$HOME_DIR/uv/bin/pip" install -q --disable-pip-version-check "uv==@@UV_VERSION@@"
    UV_PYTHON_INSTALL_DIR=$HOME_DIR/python "$HOME_DIR/uv/bin/uv" venv --seed --python "@@HARNESS_PYTHON@@" "$VENV"
  fi
fi
# Every process of this venv (the SSM lane commands run `.venv/bin/python -m agents` without a login
# shell) gets the box environment: $ETC/{env,harness.env}, explicit variables winning.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat > "$site/neuronpipe_box_env.pth" <<PTH
import os; [os.environ.setdefault(k.strip(), v.strip()) for f in ("$ETC/env", "$ETC/harness.env") if os.path.exists(f) for k, s, v in (line.partition("=") for line in open(f)) if s and not k.startswith("#")]
PTH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
aws s3 cp --region "$REGION" --only-show-errors "$uri" "$tmp/harness.zip"
python3 -m zipfile -e "$tmp/harness.zip" "$tmp/harness"
lock="$tmp/harness/box-requirements.lock"
if [ "${NEURONPIPE_SYNC_SKIP_REQUIREMENTS:-}" = "1" ]; then
  echo "neuronpipe-sync: NEURONPIPE_SYNC_SKIP_REQUIREMENTS=1: box-requirements.lock not installed (rehearsal)"
elif [ ! -f "$lock" ]; then
  echo "neuronpipe-sync: the harness $uri has no box-requirements.lock: the box installs only hash-checked packages (python -m infra.box_lock writes the lock; a deploy refuses without it)" >&2
  exit 1
else
  "$VENV/bin/python" -m pip install -q --isolated --disable-pip-version-check --require-hashes -r "$lock"
fi
if ! "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("setuptools") and (u.find_spec("setuptools.command.bdist_wheel") or u.find_spec("wheel")) else 1)'; then
  echo "neuronpipe-sync: $VENV has no setuptools that builds wheels; the harness installs offline (--no-build-isolation) and needs it (box-requirements.lock pins setuptools)" >&2
  exit 1
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --no-index \
  --force-reinstall "$tmp/harness"
rm -rf "$HOME_DIR/harness.old"; [ -d "$HOME_DIR/harness" ] && mv "$HOME_DIR/harness" "$HOME_DIR/harness.old"
mv "$tmp/harness" "$HOME_DIR/harness"
# the box scripts of this harness (this script too: renamed into place, this running copy reads on unchanged)
bash "$HOME_DIR/harness/@@HARNESS_BOX_DIR@@/@@INSTALLER@@" "$HOME_DIR/harness"
cat > "$ETC/harness.env.new" <<HARNESS_ENV
NEURONPIPE_HARNESS_SHA=$(cat "$HOME_DIR/harness/HARNESS_SHA")
NEURONPIPE_BOX_SCRIPTS_MANIFEST=$ROOT/@@BOX_SCRIPTS_MANIFEST_PATH@@
HARNESS_ENV
mv -f "$ETC/harness.env.new" "$ETC/harness.env"
echo "$uri" > "$HOME_DIR/installed-uri"
echo "harness installed: $uri ($(cat "$HOME_DIR/harness/HARNESS_SHA"))"
