#!/bin/bash
# neuronpipe on the box: the CLI with the box environment. Installed from the harness zip at every sync.
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
R="${NEURONPIPE_BOX_ROOT:-}"
set -a; . "$R/etc/neuronpipe/env"; [ -f "$R/etc/neuronpipe/harness.env" ] && . "$R/etc/neuronpipe/harness.env"; set +a
exec "$R/opt/neuronpipe/.venv/bin/neuronpipe" "$@"
