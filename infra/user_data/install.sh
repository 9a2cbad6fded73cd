#!/bin/bash
# box/install.sh HARNESS_DIR: install the box scripts this harness ships (HARNESS_DIR/box/<box path>) onto the
# box. Each is written to a temp file beside its target, then renamed over it: bash reads a running script as
# it goes, so a script rewritten in place (neuronpipe-sync runs this installer) would go on with the new
# file's bytes at the old offset; after a rename the running one keeps reading the file it opened. Then the
# SHA-256 of every installed script goes to /@@BOX_SCRIPTS_MANIFEST_PATH@@ (the provenance lane reports them).
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -euo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
SRC="${1:?usage: install.sh HARNESS_DIR}/box"
MANIFEST="$ROOT/@@BOX_SCRIPTS_MANIFEST_PATH@@"
install -d -m 0755 "$(dirname "$MANIFEST")"
manifest_tmp=$(mktemp "$MANIFEST.XXXXXX")
trap 'rm -f "$manifest_tmp"' EXIT
for rel in @@BOX_SCRIPT_PATHS@@; do
  dest="$ROOT/$rel"
  install -d -m 0755 "$(dirname "$dest")"
  tmp=$(mktemp "$(dirname "$dest")/.$(basename "$dest").XXXXXX")
  cat "$SRC/$rel" > "$tmp"
  chmod 0755 "$tmp"
  mv -f "$tmp" "$dest"
  printf '%s  /%s\n' "$(sha256sum "$dest" | cut -d' ' -f1)" "$rel" >> "$manifest_tmp"
done
chmod 0644 "$manifest_tmp"
mv -f "$manifest_tmp" "$MANIFEST"
echo "box scripts installed: $(wc -l < "$MANIFEST" | tr -d ' ') from $SRC (SHA-256 in $MANIFEST)"
