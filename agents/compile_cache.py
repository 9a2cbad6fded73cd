"""The compile cache shared through the results store: a box seeds from it before its first compile and pushes
what it compiled at the end of its segment, so a box replaced by a redeploy compiles warm.

Layout in the store (``<results root>/neuron-cache/<namespace>/``, beside ``v1/``, ``models/``, ``logs/``)::

    neuron-cache/<namespace>/<entry>/<file>...        the entry's files, byte for byte
    neuron-cache/<namespace>/<entry>.entry.json       its manifest (files, sizes, SHA-256, who pushed it), last

* **namespace**: what the entries are only valid for — the compiler's version and the NeuronCore generation
  (``neuronx-cc-2.26.6360.0+6f180f47-ncv2``); on the
  CPU backend, which compiles nothing ahead of time, the tiny-model factory's version (``cpu-tiny-v3``): the
  artifacts that backend builds on the box (tokenizer, tiny checkpoints) are keyed by their factory fingerprint
  the way a NEFF is keyed by its graph's hash, so the same seeding path runs for real locally and in the
  rehearsal.
* **entry**: a directory whose name is the producer's own key — neuronx-cc's ``neuronxcc-<ver>/MODULE_<hash>``,
  NxDI's ``nxdi/<model>/<config>-<fingerprint>``, the factory's ``tiny/<name>-<fingerprint>`` — so an entry is
  never rewritten with other content: append-only, every object created with If-None-Match (the bucket policy
  refuses a PUT without it). An entry is complete when its marker file is there (a ``.neff``, a ``model.pt``, a
  ``config.json``) and no ``*.lock`` is; incomplete ones are neither pushed nor trusted.
* **seed** downloads every manifested entry the box lacks and records them in ``.neuronpipe-seeded.json`` in the
  cache (so a compile row can say its artifacts came from S3: ``cache_basis = s3``); **push** uploads every
  complete local entry the store lacks, files first, the manifest last (a reader never sees half an entry).
* **what a seed trusts**: nothing the store says until it is checked (:func:`entry_files`). Before anything is
  written the entry's name is one of the layout's kinds inside the cache root, its manifest describes that entry in
  this namespace, and every file it lists is a plain relative name inside the entry
  (:func:`pipeline.containment.contained`); the files download into a ``.seed-*`` directory in the cache root,
  and only when each has the manifest's size and SHA-256 is that directory renamed into place.

Counts (entries fetched / already present / pushed, bytes, seconds) land in the segment's ``box_boots`` row.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agents.training.catalogue import sha256_file
from analytics.store.base import AlreadyExistsError, ResultStore
from pipeline.containment import PathEscapeError, contained

CACHE_PREFIX = "neuron-cache"
MANIFEST_SUFFIX = ".entry.json"
SEEDED_FILE = ".neuronpipe-seeded.json"


@dataclass(frozen=True)
class EntryKind:
    pattern: str  # glob of an entry's path relative to the cache root (fnmatch, "/"-separated)
    complete: tuple[str, ...]  # globs: at least one file matching one of them makes the entry complete


@dataclass(frozen=True)
class CacheLayout:
    """Where a backend's cache lives on the box and what counts as one entry."""

    root: Path
    namespace: str
    kinds: tuple[EntryKind, ...]

    def entries(self) -> list[str]:
        """Complete entries on the box, as paths relative to :attr:`root`, sorted."""
        out: list[str] = []
        if not self.root.is_dir():
            return out
        for kind in self.kinds:
            depth = kind.pattern.count("/") + 1
            for path in _dirs_at_depth(self.root, depth):
                rel = path.relative_to(self.root).as_posix()
                if fnmatch.fnmatchcase(rel, kind.pattern) and _complete(path, kind.complete):
                    out.append(rel)
        return sorted(set(out))


def _dirs_at_depth(root: Path, depth: int) -> Iterable[Path]:
    level = [root]
    for _ in range(depth):
        level = [c for d in level for c in sorted(d.iterdir()) if c.is_dir() and not c.name.startswith(".")]
    return level


def _complete(path: Path, markers: tuple[str, ...]) -> bool:
    """A marker file with bytes in it and no ``*.lock`` (a killed compile leaves its lock behind)."""
    files = [p for p in path.rglob("*") if p.is_file()]
    if any(p.name.endswith(".lock") for p in files):
        return False
    return any(fnmatch.fnmatchcase(p.name, m) and p.stat().st_size > 0 for p in files for m in markers)


NEURON_KINDS = (
    EntryKind("neuronxcc-*/MODULE_*", ("*.neff",)),
    EntryKind("nxdi/*/*", ("*.pt", "*.neff")),
    EntryKind("encoders/*", ("model.pt", "model.neuron")),  # the encode lane's traces and exports (agents.encoders)
)
CPU_KINDS = (EntryKind("tiny/*", ("config.json", "tokenizer.json")),)


def layout_for(backend: str, env: dict[str, str] | None = None) -> CacheLayout | None:
    """The backend's cache on this box; None where nothing is cached between boxes (cuda: vLLM compiles its CUDA
    graphs at every boot, and its torch.compile cache is not portable across GPU types)."""
    from agents.box_env import cache_root, compile_cache_dir

    env = dict(os.environ if env is None else env)
    if backend == "neuron":
        namespace = f"neuronx-cc-{compiler_version(env) or 'unknown'}-{neuroncore_generation(env)}"
        return CacheLayout(compile_cache_dir(env), namespace, NEURON_KINDS)
    if backend == "cpu":
        from agents.training.tiny_models import FACTORY_VERSION

        return CacheLayout(cache_root(env), f"cpu-tiny-v{FACTORY_VERSION}", CPU_KINDS)
    return None


def neuroncore_generation(env: dict[str, str] | None = None) -> str:
    """A NEFF runs only on the NeuronCore version it was compiled for: inf2 and trn1 are NeuronCore-v2, trn2 v3
    (the predecessor kept one S3 prefix per generation after trn2 met trn1's NEFFs)."""
    itype = (dict(os.environ if env is None else env).get("NEURONPIPE_INSTANCE_TYPE") or "").split(".")[0]
    return {"inf2": "ncv2", "trn1": "ncv2", "trn1n": "ncv2", "trn2": "ncv3", "trn2u": "ncv3"}.get(itype, "nc-unknown")


def compiler_version(env: dict[str, str] | None = None) -> str | None:
    """neuronx-cc's version in the DLAMI venv (its dist-info), None when it is not installed."""
    from agents.box_env import dlami_venv
    from agents.venvs import distributions

    venv = dlami_venv(env)
    if venv is None:
        return None
    return distributions(venv).get("neuronx-cc")


@dataclass
class SyncCounts:
    entries: int = 0  # fetched (seed) or pushed (push)
    bytes: int = 0
    present: int = 0  # seed: already on the box; push: already in the store
    skipped: list[str] = field(default_factory=list)  # entries refused, with why
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "bytes": self.bytes,
            "present": self.present,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 3),
        }


def _key(layout: CacheLayout, rel: str = "") -> str:
    return "/".join(p for p in (CACHE_PREFIX, layout.namespace, rel) if p)


def stored_entries(store: ResultStore, layout: CacheLayout) -> dict[str, str]:
    """Entries with a manifest in the store: relative path -> manifest key."""
    prefix = _key(layout) + "/"
    out = {}
    for key in store.list_keys(prefix):
        if key.endswith(MANIFEST_SUFFIX):
            out[key[len(prefix) : -len(MANIFEST_SUFFIX)]] = key
    return out


def push(store: ResultStore, layout: CacheLayout, who: dict[str, Any] | None = None) -> SyncCounts:
    """Upload every complete local entry the store lacks: files first, then its manifest (create-only)."""
    t0 = time.perf_counter()
    counts = SyncCounts()
    remote = stored_entries(store, layout)
    for rel in layout.entries():
        if rel in remote:
            counts.present += 1
            continue
        base = layout.root / rel
        files = sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith("."))
        listing = []
        for f in files:
            frel = f.relative_to(base).as_posix()
            key = _key(layout, f"{rel}/{frel}")
            try:
                store.put_file(key, f)
            except AlreadyExistsError:
                pass  # a push that died before its manifest: the same producer key, the same bytes
            size = f.stat().st_size
            listing.append({"path": frel, "bytes": size, "sha256": sha256_file(f)})
            counts.bytes += size
        manifest = {
            "entry": rel,
            "namespace": layout.namespace,
            "files": listing,
            "pushed_at": datetime.now(timezone.utc).isoformat(),
            "pushed_by": who or {},
        }
        try:
            store.put_bytes(_key(layout, rel + MANIFEST_SUFFIX), json.dumps(manifest, sort_keys=True).encode())
            counts.entries += 1
        except AlreadyExistsError:
            counts.present += 1  # another box pushed it meanwhile
    counts.seconds = time.perf_counter() - t0
    return counts


class ManifestError(ValueError):
    """A stored entry's manifest does not describe the entry its key names, or a file differs from it."""


@dataclass(frozen=True)
class ManifestFile:
    path: str  # relative to the entry, "/"-separated
    bytes: int
    sha256: str


SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def entry_files(layout: CacheLayout, rel: str, manifest: Any) -> list[ManifestFile]:
    """The files of stored entry ``rel`` as its manifest lists them, once every claim that decides where they land
    is checked: ``rel`` is one of the layout's kinds and stays inside the cache root, the manifest names ``rel`` and
    this namespace, and each file is a plain relative name inside the entry, listed once, with a size and a
    SHA-256. :class:`ManifestError` names what is wrong."""
    try:
        contained(layout.root, rel)
    except PathEscapeError as exc:
        raise ManifestError(f"entry {exc}") from exc
    if any(p.startswith(".") for p in rel.split("/")) or not any(
        rel.count("/") == k.pattern.count("/") and fnmatch.fnmatchcase(rel, k.pattern) for k in layout.kinds
    ):
        raise ManifestError(
            f"entry {rel!r} is none of this cache's kinds ({', '.join(k.pattern for k in layout.kinds)})"
        )
    if not isinstance(manifest, dict):
        raise ManifestError("the manifest is not a JSON object")
    if manifest.get("entry") != rel:
        raise ManifestError(f"the manifest describes entry {manifest.get('entry')!r}, its key names {rel!r}")
    if manifest.get("namespace") != layout.namespace:
        raise ManifestError(f"the manifest is for namespace {manifest.get('namespace')!r}, not {layout.namespace!r}")
    listed = manifest.get("files")
    if not isinstance(listed, list) or not listed:
        raise ManifestError("the manifest lists no files")
    out: dict[str, ManifestFile] = {}
    for f in listed:
        size, digest = (f.get("bytes"), f.get("sha256")) if isinstance(f, dict) else (None, None)
        if (
            not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
            or not isinstance(digest, str)
            or not SHA256_HEX.fullmatch(digest)
        ):
            raise ManifestError(f"manifest file {f!r}: needs path, bytes (an integer >= 0) and sha256 (64 hex)")
        try:
            contained(layout.root / rel, f.get("path"))
        except PathEscapeError as exc:
            raise ManifestError(f"file {exc}") from exc
        if f["path"] in out:
            raise ManifestError(f"file {f['path']!r} is listed twice")
        out[f["path"]] = ManifestFile(f["path"], size, digest)
    return list(out.values())


def seed(store: ResultStore, layout: CacheLayout, boot_id: str | None = None) -> SyncCounts:
    """Download every stored entry the box lacks and whose manifest holds (:func:`entry_files`), into a
    ``.seed-*`` directory in the cache root; check every file's size and SHA-256 against the manifest, then move the
    entry into place whole. Record what came from the store in :data:`SEEDED_FILE`."""
    t0 = time.perf_counter()
    counts = SyncCounts()
    local = set(layout.entries())
    fetched: list[str] = []
    for rel, mkey in sorted(stored_entries(store, layout).items()):
        if rel in local:
            counts.present += 1
            continue
        try:
            manifest = json.loads(store.get_bytes(mkey))
        except ValueError as exc:
            counts.skipped.append(f"{rel}: unreadable manifest ({exc})")
            continue
        try:
            files = entry_files(layout, rel, manifest)
        except ManifestError as exc:
            counts.skipped.append(f"{rel}: {exc}")
            continue
        dest = contained(layout.root, rel)
        if dest.exists():
            counts.skipped.append(f"{rel}: an incomplete local copy is in the way (left alone)")
            continue
        layout.root.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".seed-", dir=layout.root))
        try:
            for f in files:
                target = contained(stage, f.path)
                store.download(_key(layout, f"{rel}/{f.path}"), target)
                size = target.stat().st_size
                if size != f.bytes:
                    raise ManifestError(f"{f.path}: {size} bytes, its manifest says {f.bytes}")
                if sha256_file(target) != f.sha256:
                    raise ManifestError(f"{f.path}: SHA-256 differs from its manifest")
            dest.parent.mkdir(parents=True, exist_ok=True)
            stage.rename(dest)
        except Exception as exc:  # noqa: BLE001 - one entry's damage never stops the seed; it is reported
            shutil.rmtree(stage, ignore_errors=True)
            counts.skipped.append(f"{rel}: {type(exc).__name__}: {exc}")
            continue
        counts.entries += 1
        counts.bytes += sum(f.bytes for f in files)
        fetched.append(rel)
    if fetched or boot_id:
        record_seeded(layout, fetched, boot_id)
    counts.seconds = time.perf_counter() - t0
    return counts


def record_seeded(layout: CacheLayout, fetched: list[str], boot_id: str | None) -> None:
    path = layout.root / SEEDED_FILE
    layout.root.mkdir(parents=True, exist_ok=True)
    body = {
        "boot_id": boot_id,
        "namespace": layout.namespace,
        "entries": sorted(fetched),
        "ts": datetime.now(timezone.utc).isoformat(),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, sort_keys=True))
    tmp.replace(path)


def seeded_entries(root: Path, boot_id: str | None = None) -> set[str]:
    """Entries this boot's seed fetched from the store (empty when no seed ran this boot)."""
    try:
        body = json.loads((Path(root) / SEEDED_FILE).read_text())
    except (OSError, ValueError):
        return set()
    if boot_id is not None and body.get("boot_id") not in (None, boot_id):
        return set()
    return set(body.get("entries") or [])


def current_boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None
