#!/bin/bash
# neuron-pipelines @@BOX_ROLE@@ box, first boot only (user data). Installs the per-boot setup,
# the harness in its own venv beside the DLAMI's, and the `neuronpipe-agent` entry point; then
# stops the instance. Between runs the box stays stopped, never terminated (termination protection,
# shutdown behaviour "stop"); Step Functions starts it for a run and stops it on every exit path.
set -uo pipefail
exec > >(tee -a /var/log/neuronpipe-bootstrap.log) 2>&1
trap 'rc=$?; echo "bootstrap exit $rc"; echo "$rc" > /var/lib/neuronpipe-bootstrap.rc; shutdown -h +1 "neuronpipe first boot done (rc=$rc)"' EXIT
set -e
install -d -m 0755 /etc/neuronpipe /opt/neuronpipe /var/lib/cloud/scripts/per-boot

cat > /var/lib/cloud/scripts/per-boot/10-neuronpipe.sh <<'NEURONPIPE_PER_BOOT'
@@PER_BOOT_SCRIPT@@
NEURONPIPE_PER_BOOT
chmod 0755 /var/lib/cloud/scripts/per-boot/10-neuronpipe.sh

cat > /usr/local/bin/neuronpipe-sync <<'NEURONPIPE_SYNC'
@@SYNC_SCRIPT@@
NEURONPIPE_SYNC

cat > /usr/local/bin/neuronpipe-agent <<'NEURONPIPE_AGENT'
#!/bin/bash
# python -m agents with the box environment (what the state machine's SSM commands call).
set -a; . /etc/neuronpipe/env; [ -f /etc/neuronpipe/harness.env ] && . /etc/neuronpipe/harness.env; set +a
exec /opt/neuronpipe/.venv/bin/python -m agents "$@"
NEURONPIPE_AGENT

cat > /usr/local/bin/neuronpipe <<'NEURONPIPE_CLI'
#!/bin/bash
set -a; . /etc/neuronpipe/env; [ -f /etc/neuronpipe/harness.env ] && . /etc/neuronpipe/harness.env; set +a
exec /opt/neuronpipe/.venv/bin/neuronpipe "$@"
NEURONPIPE_CLI
chmod 0755 /usr/local/bin/neuronpipe-sync /usr/local/bin/neuronpipe-agent /usr/local/bin/neuronpipe

/var/lib/cloud/scripts/per-boot/10-neuronpipe.sh   # per-boot scripts run before user data on first boot
/usr/local/bin/neuronpipe-sync --force
/usr/local/bin/neuronpipe-agent --help >/dev/null
echo "bootstrap ok: $(cat /opt/neuronpipe/harness/HARNESS_SHA)"
