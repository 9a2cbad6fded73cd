# A fragment of the first-boot user data (bootstrap.sh, ephemeral.sh), inlined where they name it
# (FIRST_BOOT_HEAD); this comment is not. Bash, its log, the exit record (ON_EXIT: what else the EXIT trap does
# on that box), box.conf written and read.

[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -uo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
mkdir -p "$ROOT/var/log" "$ROOT/var/lib"
exec > >(tee -a "$ROOT/var/log/neuronpipe-bootstrap.log") 2>&1
trap 'rc=$?; echo "bootstrap exit $rc"; echo "$rc" > "$ROOT/var/lib/neuronpipe-bootstrap.rc"@@ON_EXIT@@' EXIT
set -e
install -d -m 0755 "$ROOT/etc/neuronpipe" "$ROOT/opt/neuronpipe" "$ROOT/var/lib/cloud/scripts/per-boot" "$ROOT/usr/local/bin"

cat > "$ROOT/@@BOX_CONF_PATH@@.new" <<'NEURONPIPE_BOX_CONF'
# The box's values, written once by its first boot's user data; the box scripts read them.
@@BOX_CONF@@
NEURONPIPE_BOX_CONF
mv "$ROOT/@@BOX_CONF_PATH@@.new" "$ROOT/@@BOX_CONF_PATH@@"
. "$ROOT/@@BOX_CONF_PATH@@"
