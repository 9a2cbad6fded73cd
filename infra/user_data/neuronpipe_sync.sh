#!/bin/bash
# neuronpipe-sync [--force]: install the harness named by SSM parameter @@HARNESS_PARAM@@
# (an s3:// zip published by `cdk deploy`) into /opt/neuronpipe/.venv, its own venv beside the
# DLAMI's. Box-side versions come from the harness's box-requirements.txt (exact pins); the harness
# itself is installed --no-deps. Same URI as last time: nothing to do.
set -euo pipefail
REGION=@@REGION@@
HOME_DIR=/opt/neuronpipe
VENV=$HOME_DIR/.venv
uri=$(aws ssm get-parameter --region "$REGION" --name "@@HARNESS_PARAM@@" --query Parameter.Value --output text)
if [ "${1:-}" != "--force" ] && [ -f "$HOME_DIR/installed-uri" ] && [ "$(cat "$HOME_DIR/installed-uri")" = "$uri" ]; then
  echo "harness up to date: $uri ($(cat "$HOME_DIR/harness/HARNESS_SHA" 2>/dev/null))"; exit 0
fi
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
# shell) gets the box environment: /etc/neuronpipe/{env,harness.env}, explicit variables winning.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat > "$site/neuronpipe_box_env.pth" <<'PTH'
import os; [os.environ.setdefault(k.strip(), v.strip()) for f in ("/etc/neuronpipe/env", "/etc/neuronpipe/harness.env") if os.path.exists(f) for k, s, v in (line.partition("=") for line in open(f)) if s and not k.startswith("#")]
PTH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
aws s3 cp --region "$REGION" --only-show-errors "$uri" "$tmp/harness.zip"
python3 -m zipfile -e "$tmp/harness.zip" "$tmp/harness"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$tmp/harness/box-requirements.txt"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$tmp/harness"
rm -rf "$HOME_DIR/harness.old"; [ -d "$HOME_DIR/harness" ] && mv "$HOME_DIR/harness" "$HOME_DIR/harness.old"
mv "$tmp/harness" "$HOME_DIR/harness"
echo "NEURONPIPE_HARNESS_SHA=$(cat "$HOME_DIR/harness/HARNESS_SHA")" > /etc/neuronpipe/harness.env
echo "$uri" > "$HOME_DIR/installed-uri"
echo "harness installed: $uri ($(cat "$HOME_DIR/harness/HARNESS_SHA"))"
