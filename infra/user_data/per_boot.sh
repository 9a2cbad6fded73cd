#!/bin/bash
# neuron-pipelines box, every boot (cloud-init per-boot): compile-cache volume, swap, and
# /etc/neuronpipe/env. The box's values come from /@@BOX_CONF_PATH@@ (written once by the first boot's
# user data); this script comes from the harness zip, reinstalled at every sync. Idempotent; safe to run by
# hand. Its LAST step writes /@@BOOT_DONE_PATH@@ (removed first thing): neuronpipe-sync waits for it.
# Every box path is under ${NEURONPIPE_BOX_ROOT:-} (empty on a box; a sandbox dir in the rehearsal).
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"
set -euo pipefail
ROOT="${NEURONPIPE_BOX_ROOT:-}"
IMDS="${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}"
BOOT_DONE="$ROOT/@@BOOT_DONE_PATH@@"
mkdir -p "$ROOT/run/neuronpipe" "$ROOT/var/log"
rm -f "$BOOT_DONE"
exec >>"$ROOT/var/log/neuronpipe-boot.log" 2>&1
CONF="$ROOT/@@BOX_CONF_PATH@@"
if [ ! -f "$CONF" ]; then
  echo "per-boot: $CONF missing (the first boot's user data writes it): nothing set up" >&2
  exit 1
fi
. "$CONF"
echo "== $(date -Is) per-boot ($BOX_ROLE)"
CACHE_DIR="$ROOT/var/cache/neuronpipe"

imds() {  # IMDSv2 only (HttpTokens=required)
  local token
  token=$(curl -sf -X PUT "$IMDS/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -sf -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/$1"
}

ebs_device() {  # the block device of an EBS volume id, waiting up to 10 min for the attachment
  local id="${1//-/}" i d
  for i in $(seq 1 120); do
    for d in "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${id}" "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${id}_1"; do
      if [ -e "$d" ]; then readlink -f "$d"; return 0; fi
    done
    sleep 5
  done
  echo "volume $1 never appeared" >&2
  return 1
}

SCRATCH=""
devices() {  # block devices: needs root and the instance's EBS/NVMe attachments
  # Compile cache: a gp3 volume that survives stop/start (cold vs warm compile is a result). An ephemeral box
  # (CACHE_VOLUME_ID empty) has none: the same directories sit on its root disk, seeded from the S3 cache.
  if [ -n "$CACHE_VOLUME_ID" ]; then
    dev=$(ebs_device "$CACHE_VOLUME_ID")
    blkid "$dev" >/dev/null 2>&1 || mkfs.ext4 -q -L np-cache "$dev"
    mkdir -p "$CACHE_DIR"
    mountpoint -q "$CACHE_DIR" || mount -o noatime "$dev" "$CACHE_DIR"
  else
    echo "no compile-cache volume (an ephemeral box): $CACHE_DIR is on the root disk"
  fi
  mkdir -p "$CACHE_DIR/neuron-compile-cache" "$CACHE_DIR/hf"

  # EBS swap (inf2: 16 GiB host RAM cannot load an 8B model): persistent, formatted once.
  if [ -n "$SWAP_VOLUME_ID" ]; then
    sdev=$(ebs_device "$SWAP_VOLUME_ID")
    blkid -t TYPE=swap "$sdev" >/dev/null 2>&1 || mkswap -L np-swap "$sdev"
    swapon --show=NAME --noheadings | grep -qx "$sdev" || swapon "$sdev"
  fi

  # Instance-store swap (trn1): the NVMe is wiped at every stop, so scratch + swap are re-made each boot.
  if [ "$NVME_SWAP_GIB" != "0" ]; then
    nv=$(ls /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_* 2>/dev/null | grep -v -- '-part' | head -n1 || true)
    if [ -n "$nv" ]; then
      nv=$(readlink -f "$nv"); SCRATCH="$ROOT/scratch"
      mountpoint -q "$SCRATCH" || { mkfs.ext4 -q -F -L np-scratch "$nv"; mkdir -p "$SCRATCH"; mount -o noatime "$nv" "$SCRATCH"; }
      if ! swapon --show=NAME --noheadings | grep -qx "$SCRATCH/swapfile"; then
        fallocate -l "${NVME_SWAP_GIB}G" "$SCRATCH/swapfile" && chmod 600 "$SCRATCH/swapfile"
        mkswap "$SCRATCH/swapfile" && swapon "$SCRATCH/swapfile"
      fi
      mkdir -p "$SCRATCH/tmp" && chmod 1777 "$SCRATCH/tmp"
    else
      echo "no instance-store NVMe found: no NVMe swap this boot"
    fi
  fi

  # Root-disk swap (an ephemeral box of a small type: inf2.xlarge's 16 GiB host RAM cannot load an 8B model, and it
  # has no swap volume): a swap file on the root volume, made once (the box lives for one cell).
  if [ "${ROOT_SWAP_GIB:-0}" != "0" ] && ! swapon --show=NAME --noheadings | grep -qx /swapfile; then
    [ -f /swapfile ] || { fallocate -l "${ROOT_SWAP_GIB}G" /swapfile && chmod 600 /swapfile && mkswap /swapfile; }
    swapon /swapfile
  fi

}
if [ -n "$ROOT" ]; then
  # A sandbox (the rehearsal): no block devices to format, mount or swap on. Everything else runs.
  echo "box root $ROOT: compile-cache volume, EBS swap and instance-store scratch skipped (need root and devices)"
  mkdir -p "$CACHE_DIR/neuron-compile-cache" "$CACHE_DIR/hf"
else
  devices
fi

# The DLAMI venv the lanes drive the accelerator with (under the box root: a sandbox holds a fake DLAMI tree).
shopt -s extglob
DLAMI_VENV=$(ls -d "$ROOT"$DLAMI_VENV_GLOB 2>/dev/null | sort | tail -n1 || true)
shopt -u extglob
install -d -m 0755 "$ROOT/etc/neuronpipe"
cat > "$ROOT/etc/neuronpipe/env.new" <<ENV
NEURONPIPE_BOX_ROLE=$BOX_ROLE
NEURONPIPE_BACKEND=${BACKEND:-neuron}
NEURONPIPE_RESULTS=$RESULTS_URI
NEURONPIPE_CACHE=$CACHE_DIR
NEURON_COMPILE_CACHE_URL=$CACHE_DIR/neuron-compile-cache
HF_HOME=$CACHE_DIR/hf
NEURONPIPE_HF_TOKEN_SECRET=$HF_TOKEN_SECRET
NEURONPIPE_DLAMI_VENV=$DLAMI_VENV
NEURONPIPE_HARNESS_DIR=$ROOT/opt/neuronpipe/harness
NEURONPIPE_SCRATCH=$SCRATCH
NEURONPIPE_INSTANCE_ID=$(imds instance-id || echo unknown)
NEURONPIPE_INSTANCE_TYPE=$(imds instance-type || echo unknown)
NEURONPIPE_AMI_ID=$(imds ami-id || echo unknown)
AWS_DEFAULT_REGION=$REGION
ENV
mv "$ROOT/etc/neuronpipe/env.new" "$ROOT/etc/neuronpipe/env"
free -g; swapon --show; df -h "$CACHE_DIR"
# Last step: the marker neuronpipe-sync waits for (boot id: a stale marker from an earlier boot is
# impossible anyway, /run is a tmpfs, but the id says which boot finished).
cat /proc/sys/kernel/random/boot_id > "$BOOT_DONE.new" 2>/dev/null || date -Is > "$BOOT_DONE.new"
mv "$BOOT_DONE.new" "$BOOT_DONE"
echo "== per-boot done"
