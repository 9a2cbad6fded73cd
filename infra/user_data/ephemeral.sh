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
@@FIRST_BOOT_HEAD@@

@@SERVING_INSTALL@@

@@INSTALL_BOX_SCRIPTS@@

NEURONPIPE_SYNC_NO_BOOT_WAIT=1 "$ROOT/@@SYNC_PATH@@" --force
"$ROOT/@@PER_BOOT_PATH@@"   # last: the box env file, then the marker the state machine's sync waits for
echo "bootstrap ok: $(cat "$ROOT/opt/neuronpipe/harness/HARNESS_SHA")"
