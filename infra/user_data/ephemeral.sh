#!/bin/bash
# neuron-pipelines @@BOX_ROLE@@ EPHEMERAL box (one cell of a run matrix), the user data of its only boot. The state
# machine launches it from its type's launch template and TERMINATES it at the cell's end, so nothing here stops or
# shuts it down (its shutdown behaviour is "terminate": a shutdown would end the cell) and nothing tags it (the
# launch tags it). It writes the box's values to /@@BOX_CONF_PATH@@;
# serving stack: it @@SERVING_SUMMARY@@;
# then it installs the box scripts from the harness zip and the harness (neuronpipe-sync, not waiting for the
# per-boot marker), and runs the per-boot setup LAST: its marker /@@BOOT_DONE_PATH@@ says the whole first boot is
# done, and the state machine's sync waits for it. No compile-cache volume and no swap volume: the cache directory
# sits on the root disk, seeded from the S3 compile cache. Box paths are under ${NEURONPIPE_BOX_ROOT:-} (empty on
# a box; a sandbox dir in tests).
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -uo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
mkdir -p "$ROOT/var/log" "$ROOT/var/lib"
exec > >(tee -a "$ROOT/var/log/neuronpipe-bootstrap.log") 2>&1
trap 'rc=$?; echo "bootstrap exit $rc"; echo "$rc" > "$ROOT/var/lib/neuronpipe-bootstrap.rc"' EXIT
set -e
install -d -m 0755 "$ROOT/etc/neuronpipe" "$ROOT/opt/neuronpipe" "$ROOT/var/lib/cloud/scripts/per-boot" "$ROOT/usr/local/bin"

cat > "$ROOT/@@BOX_CONF_PATH@@.new" <<'NEURONPIPE_BOX_CONF'
# The box's values, written by its first boot's user data (an ephemeral box); the box scripts read them.
@@BOX_CONF@@
NEURONPIPE_BOX_CONF
mv "$ROOT/@@BOX_CONF_PATH@@.new" "$ROOT/@@BOX_CONF_PATH@@"
. "$ROOT/@@BOX_CONF_PATH@@"

@@SERVING_INSTALL@@

# The box scripts come from the harness zip (the first one installed here; every sync installs its own).
uri=$(aws ssm get-parameter --region "$REGION" --name "$HARNESS_PARAM" --query Parameter.Value --output text)
tmp=$(mktemp -d)
aws s3 cp --region "$REGION" --only-show-errors "$uri" "$tmp/harness.zip"
python3 -m zipfile -e "$tmp/harness.zip" "$tmp/harness"
bash "$tmp/harness/@@HARNESS_BOX_DIR@@/@@INSTALLER@@" "$tmp/harness"
rm -rf "$tmp"

NEURONPIPE_SYNC_NO_BOOT_WAIT=1 "$ROOT/@@SYNC_PATH@@" --force
"$ROOT/@@PER_BOOT_PATH@@"   # last: the box env file, then the marker the state machine's sync waits for
echo "bootstrap ok: $(cat "$ROOT/opt/neuronpipe/harness/HARNESS_SHA")"
