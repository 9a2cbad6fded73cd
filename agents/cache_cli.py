"""``python -m agents cache seed|push``: the compile cache's trip through the results store, and the boot's record.

* ``seed`` (the segment's harness sync runs it, before the first lane): fetch the entries the box lacks
  (:func:`agents.compile_cache.seed`); stamp ``cache_seeded`` and the counts in the box's stamp directory.
* ``push`` (the segment's ``PushCompileCache`` step, after its last lane; the local run, after its last lane):
  upload what the box compiled, then write the boot's ``box_boots`` row — the stamps of this boot (start
  requested, per-boot setup done, first command, harness synced, cache seeded) and both directions' counts —
  as its own committed attempt (lane ``boot@<box>.w<segment>``); call Step Functions back when given a token.

A stamp is a file ``<box root>/run/neuronpipe/stamps/<name>`` holding an ISO-8601 time (``/run`` is a tmpfs:
one boot's stamps only). A missing stamp is a NULL in the row, never a made-up time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agents.compile_cache import current_boot_id, layout_for, push, seed
from pipeline.lanes import boot_record_lane

STAMPS = ("start_requested", "sync_started", "harness_synced", "cache_seeded")
CAUSE_LIMIT = 1024  # what crosses Step Functions of a failure (the full text is in the command's log)


def box_root() -> Path:
    return Path(os.environ.get("NEURONPIPE_BOX_ROOT") or "/")


def stamp_dir() -> Path:
    return Path(os.environ.get("NEURONPIPE_STAMP_DIR") or box_root() / "run" / "neuronpipe" / "stamps")


def write_stamp(name: str, when: datetime | None = None) -> None:
    d = stamp_dir()
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{name}.tmp"
    tmp.write_text((when or datetime.now(timezone.utc)).isoformat())
    tmp.replace(d / name)


def read_stamp(name: str) -> datetime | None:
    try:
        text = (stamp_dir() / name).read_text().strip()
    except OSError:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def boot_done_at() -> datetime | None:
    """The per-boot setup's marker (written last by it): its mtime is when the setup finished."""
    try:
        return datetime.fromtimestamp((box_root() / "run" / "neuronpipe" / "boot.done").stat().st_mtime, timezone.utc)
    except OSError:
        return None


def kernel_boot_at() -> datetime | None:
    """The kernel's boot time (``btime`` in /proc/stat) on a real box; None in a sandbox (the rehearsal's boxes
    share this machine's kernel, whose boot says nothing about theirs)."""
    if os.environ.get("NEURONPIPE_BOX_ROOT"):
        return None
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), timezone.utc)
    except (OSError, ValueError):
        return None
    return None


def _backend() -> str:
    from agents.backend import detect_backend

    return detect_backend()


def cmd_seed(args: argparse.Namespace) -> int:
    from analytics.store import open_store

    backend = args.backend or _backend()
    layout = layout_for(backend)
    if layout is None:
        print(f"cache seed: backend {backend} keeps no compile cache between boxes: nothing to seed")
        write_stamp("cache_seeded")
        (stamp_dir() / "seed.json").write_text(json.dumps({"backend": backend, "namespace": None}))
        return 0
    counts = seed(open_store(args.results), layout, boot_id=current_boot_id())
    write_stamp("cache_seeded")
    (stamp_dir() / "seed.json").write_text(
        json.dumps({"backend": backend, "namespace": layout.namespace, "root": str(layout.root), **counts.as_dict()})
    )
    print(
        f"cache seed: {counts.entries} entr(ies) fetched ({counts.bytes} bytes), {counts.present} already here, "
        f"{len(counts.skipped)} refused, {counts.seconds:.1f} s [{layout.namespace}]"
    )
    for line in counts.skipped:
        print(f"cache seed: refused {line}", file=sys.stderr)
    return 0


def boot_row(
    args: argparse.Namespace, backend: str, namespace: str | None, cache_uri: str | None, pushed: dict[str, Any] | None
) -> dict[str, Any]:
    try:
        seeded = json.loads((stamp_dir() / "seed.json").read_text())
    except (OSError, ValueError):
        seeded = {}
    env = os.environ
    return {
        "box_role": args.box_role,
        "segment": args.segment,
        "instance_id": env.get("NEURONPIPE_INSTANCE_ID") or None,
        "instance_type": env.get("NEURONPIPE_INSTANCE_TYPE") or None,
        "boot_id": current_boot_id(),
        "backend": backend,
        "start_requested_at": read_stamp("start_requested"),
        "kernel_boot_at": kernel_boot_at(),
        "boot_done_at": boot_done_at(),
        "sync_started_at": read_stamp("sync_started"),
        "harness_synced_at": read_stamp("harness_synced"),
        "cache_seeded_at": read_stamp("cache_seeded"),
        "seed_entries_fetched": seeded.get("entries"),
        "seed_bytes_fetched": seeded.get("bytes"),
        "seed_entries_present": seeded.get("present"),
        "seed_s": seeded.get("seconds"),
        "push_entries": None if pushed is None else pushed["entries"],
        "push_bytes": None if pushed is None else pushed["bytes"],
        "push_s": None if pushed is None else pushed["seconds"],
        "cache_uri": cache_uri,
        "cache_namespace": namespace,
        "ts": datetime.now(timezone.utc),
    }


def cmd_push(args: argparse.Namespace) -> int:
    from agents.callback import make_callback
    from analytics.store import open_store

    callback = make_callback(args.task_token)
    try:
        store = open_store(args.results)
        backend = args.backend or _backend()
        layout = layout_for(backend)
        pushed = None
        namespace = cache_uri = None
        if layout is not None:
            who = {
                "run_id": args.run_id,
                "box_role": args.box_role,
                "segment": args.segment,
                "instance_id": os.environ.get("NEURONPIPE_INSTANCE_ID"),
            }
            counts = push(store, layout, who)
            pushed = counts.as_dict()
            namespace = layout.namespace
            cache_uri = store.uri(f"neuron-cache/{layout.namespace}")
            print(
                f"cache push: {counts.entries} entr(ies) pushed ({counts.bytes} bytes), {counts.present} already "
                f"stored, {counts.seconds:.1f} s [{namespace}]"
            )
        else:
            print(f"cache push: backend {backend} keeps no compile cache between boxes: nothing to push")
        lane = boot_record_lane(args.box_role, args.segment)
        writer = store.begin_attempt(args.run_id, lane)
        writer.add_rows("box_boots", [boot_row(args, backend, namespace, cache_uri, pushed)])
        writer.commit("succeeded")
    except Exception as exc:  # noqa: BLE001 - reported to Step Functions, short; the log has the whole text
        message = f"{type(exc).__name__}: {exc}"
        print(f"cache push failed: {message}", file=sys.stderr)
        callback.failure("Cache.PushFailed", message[:CAUSE_LIMIT])
        return 1
    # the attempt it proposed: the state machine's commit_lane commits it (a box never commits itself on AWS)
    callback.success({"pushed": pushed["entries"] if pushed else 0, "lane": lane, "attempt": writer.attempt})
    return 0


def add_parser(sub: Any) -> None:
    c = sub.add_parser("cache", help="seed the box's compile cache from the results store, or push what it compiled")
    csub = c.add_subparsers(dest="cache_command", required=True)
    s = csub.add_parser("seed", help="fetch the cache entries this box lacks (before the first compile)")
    s.add_argument("--results", required=True, help="results root: a directory or s3://bucket/prefix")
    s.add_argument("--backend", default=None, choices=("neuron", "cuda", "cpu"))
    p = csub.add_parser("push", help="upload this box's new cache entries and record the boot (segment end)")
    p.add_argument("--results", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--box-role", required=True)
    p.add_argument("--segment", type=int, default=0, help="the wave this segment belongs to")
    p.add_argument("--backend", default=None, choices=("neuron", "cuda", "cpu"))
    p.add_argument("--task-token", default=None, help="Step Functions task token (callback)")


def main(args: argparse.Namespace) -> int:
    if args.cache_command == "seed":
        try:
            return cmd_seed(args)
        except Exception as exc:  # noqa: BLE001 - a failed seed costs a cold compile, never the segment
            print(f"cache seed failed (the box compiles cold): {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    return cmd_push(args)
