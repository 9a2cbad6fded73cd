#!/bin/bash
# neuron-pipelines @@BOX_ROLE@@ box, first boot only (user data). Installs the per-boot setup,
# the harness in its own venv beside the DLAMI's, and the `neuronpipe-agent` entry point; then
# stops the instance. Between runs the box stays stopped, never terminated (termination protection,
# shutdown behaviour "stop"); Step Functions starts it for a run and stops it on every exit path.
# Box paths are under ${NEURONPIPE_BOX_ROOT:-} (empty on a box; a sandbox, where nothing shuts down).
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -uo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
mkdir -p "$ROOT/var/log" "$ROOT/var/lib"
exec > >(tee -a "$ROOT/var/log/neuronpipe-bootstrap.log") 2>&1
trap 'rc=$?; echo "bootstrap exit $rc"; echo "$rc" > "$ROOT/var/lib/neuronpipe-bootstrap.rc"; [ -n "$ROOT" ] || shutdown -h +1 "neuronpipe first boot done (rc=$rc)"' EXIT
set -e
install -d -m 0755 "$ROOT/etc/neuronpipe" "$ROOT/opt/neuronpipe" "$ROOT/var/lib/cloud/scripts/per-boot" "$ROOT/usr/local/bin"

cat > "$ROOT/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh" <<'NEURONPIPE_PER_BOOT'
@@PER_BOOT_SCRIPT@@
NEURONPIPE_PER_BOOT
chmod 0755 "$ROOT/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh"

cat > "$ROOT/usr/local/bin/neuronpipe-sync" <<'NEURONPIPE_SYNC'
@@SYNC_SCRIPT@@
NEURONPIPE_SYNC

cat > "$ROOT/usr/local/bin/neuronpipe-agent" <<'NEURONPIPE_AGENT'
#!/bin/bash
# python -m agents with the box environment (what the state machine's SSM commands call).
R="${NEURONPIPE_BOX_ROOT:-}"
set -a; . "$R/etc/neuronpipe/env"; [ -f "$R/etc/neuronpipe/harness.env" ] && . "$R/etc/neuronpipe/harness.env"; set +a
exec "$R/opt/neuronpipe/.venv/bin/python" -m agents "$@"
NEURONPIPE_AGENT

cat > "$ROOT/usr/local/bin/neuronpipe" <<'NEURONPIPE_CLI'
#!/bin/bash
R="${NEURONPIPE_BOX_ROOT:-}"
set -a; . "$R/etc/neuronpipe/env"; [ -f "$R/etc/neuronpipe/harness.env" ] && . "$R/etc/neuronpipe/harness.env"; set +a
exec "$R/opt/neuronpipe/.venv/bin/neuronpipe" "$@"
NEURONPIPE_CLI
chmod 0755 "$ROOT/usr/local/bin/neuronpipe-sync" "$ROOT/usr/local/bin/neuronpipe-agent" "$ROOT/usr/local/bin/neuronpipe"

"$ROOT/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh"   # per-boot scripts run before user data on first boot
"$ROOT/usr/local/bin/neuronpipe-sync" --force
"$ROOT/usr/local/bin/neuronpipe-agent" --help >/dev/null
echo "bootstrap ok: $(cat "$ROOT/opt/neuronpipe/harness/HARNESS_SHA")"
