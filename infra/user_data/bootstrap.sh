#!/bin/bash
# neuron-pipelines @@BOX_ROLE@@ box, first boot only (user data). EC2 never runs user data again on this
# instance, so this script holds only what is fixed for the box's life: it writes the box's values ONCE to
# /@@BOX_CONF_PATH@@, installs the box scripts from the harness zip with the installer every later
# neuronpipe-sync runs too (so they never stay at this boot's version), runs the per-boot setup and the first
# harness sync, tags the instance @@BOOTSTRAP_TAG@@=@@BOOTSTRAP_DONE@@ (the idle reaper leaves a box without it
# alone during its first boot), then stops it. Between runs the box stays stopped, never terminated
# (termination protection, shutdown behaviour "stop"); Step Functions starts it for a run and stops it on every
# exit path. Box paths are under ${NEURONPIPE_BOX_ROOT:-} (empty on a box; a sandbox, where nothing shuts down).
@@FIRST_BOOT_HEAD@@

@@INSTALL_BOX_SCRIPTS@@

# The rag lane's pgvector store: PostgreSQL 16 and pgvector from the PostgreSQL project's apt repository (Ubuntu
# 22.04's own archive has no pgvector), on an inf2 box; the lane starts and stops its own server, so the packaged
# cluster is stopped and disabled. A box that cannot install them still boots: the lane's pgvector store then fails
# with PostgreSQL's absence as its reason, and LanceDB remains.
if [ "@@BOX_ROLE@@" = inf2 ] && [ -z "$ROOT" ] && command -v apt-get >/dev/null; then
  { install -d -m 0755 "$ROOT/usr/share/postgresql-common/pgdg" \
    && curl -fsSL -o "$ROOT/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc" \
         https://www.postgresql.org/media/keys/ACCC4CF8.asc \
    && echo "deb [signed-by=/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc] https://apt.postgresql.org/pub/repos/apt $(. /etc/os-release && echo "$VERSION_CODENAME")-pgdg main" \
         > "$ROOT/etc/apt/sources.list.d/pgdg.list" \
    && apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-16 postgresql-16-pgvector \
    && systemctl disable --now postgresql; } \
    || echo "bootstrap: PostgreSQL 16 + pgvector not installed: the rag lane's pgvector store is unavailable here"
fi

"$ROOT/@@PER_BOOT_PATH@@"   # cloud-init runs per-boot scripts before user data: on this boot there were none yet
"$ROOT/@@SYNC_PATH@@" --force
"$ROOT/@@AGENT_PATH@@" --help >/dev/null
. "$ROOT/etc/neuronpipe/env"   # NEURONPIPE_INSTANCE_ID (the per-boot setup read it from IMDS)
aws ec2 create-tags --region "$REGION" --resources "$NEURONPIPE_INSTANCE_ID" \
    --tags "Key=@@BOOTSTRAP_TAG@@,Value=@@BOOTSTRAP_DONE@@" \
  || echo "bootstrap: could not tag $NEURONPIPE_INSTANCE_ID @@BOOTSTRAP_TAG@@=@@BOOTSTRAP_DONE@@: the idle reaper treats the box as still in its first boot for a while after each start"
echo "bootstrap ok: $(cat "$ROOT/opt/neuronpipe/harness/HARNESS_SHA")"
