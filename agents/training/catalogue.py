"""Where the catalogue's checkpoints come from (the names per profile are rules: ``pipeline.model_catalogue``).

``tiny`` (local, tests): the tiny-model factory. ``full`` (the boxes): the
Hugging Face hub, with a token read from Secrets Manager (gated models need
their licence accepted), cached on EBS. ``resolve_model`` returns a local
checkpoint directory and the SHA-256 of every file in it (``artifacts`` rows,
stage ``download``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.model_catalogue import (  # noqa: F401 - the catalogue's names, re-exported for the box side
    MODEL_CATALOGUE,
    PROFILE_MODELS,
    SMOKE_MODEL,
    ModelEntry,
    Source,
    UnknownModelError,
    get_model,
    model_names,
    smoke_model,
)

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_secretsmanager import SecretsManagerClient

HUB_TOKEN_SECRET_ENV = "NEURONPIPE_HF_TOKEN_SECRET"  # name/ARN of the Secrets Manager secret holding the token
DEFAULT_HUB_TOKEN_SECRET = "neuronpipe/hf-token"


class HubAccessError(RuntimeError):
    """The hub refused the download: no token, a bad token, or a gated licence not accepted."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def hash_tree(root: Path, memo: Path | None = None) -> list[dict[str, Any]]:
    """(path relative to root, bytes, sha256) of every file under ``root``, sorted, hidden files skipped.

    ``memo``: a JSON file remembering hashes by (path, size, mtime) so a 16 GB checkpoint in the EBS
    cache is hashed once per download, not once per lane.
    """
    import json

    root = Path(root)
    known: dict[str, Any] = {}
    if memo is not None and memo.is_file():
        try:
            known = json.loads(memo.read_text())
        except (OSError, ValueError):
            known = {}
    out, fresh = [], {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            st = p.stat()
            stamp = [st.st_size, st.st_mtime_ns]
            hit = known.get(rel.as_posix())
            sha = hit["sha256"] if hit and hit.get("stamp") == stamp else sha256_file(p)
            fresh[rel.as_posix()] = {"stamp": stamp, "sha256": sha}
            out.append({"path": rel.as_posix(), "bytes": st.st_size, "sha256": sha})
    if memo is not None and fresh != known:
        try:
            memo.write_text(json.dumps(fresh, sort_keys=True))
        except OSError:
            pass
    return out


def read_hub_token(secret_id: str | None = None, client: SecretsManagerClient | None = None) -> str:
    """The hub token from Secrets Manager (plain string, or JSON with a ``token``/``HF_TOKEN`` key)."""
    import json

    secret_id = secret_id or os.environ.get(HUB_TOKEN_SECRET_ENV, DEFAULT_HUB_TOKEN_SECRET)
    if client is None:
        import boto3

        client = boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=secret_id)["SecretString"]
    except Exception as exc:  # botocore errors become one clear message
        raise HubAccessError(
            f"cannot read the Hugging Face token from Secrets Manager secret {secret_id!r} "
            f"({type(exc).__name__}: {exc}). Store a read token there (aws secretsmanager create-secret "
            f"--name {secret_id} --secret-string hf_...) or point {HUB_TOKEN_SECRET_ENV} at the secret."
        ) from exc
    value = value.strip()
    if value.startswith("{"):
        raw = json.loads(value)
        value = raw.get("token") or raw.get("HF_TOKEN") or ""
    if not value:
        raise HubAccessError(f"Secrets Manager secret {secret_id!r} holds no token")
    return value


def download_from_hub(entry: ModelEntry, cache_dir: Path, token: str, snapshot_download: Any = None) -> Path:
    """``snapshot_download`` of the safetensors checkpoint into the EBS cache; clear errors for gating."""
    if snapshot_download is None:
        from huggingface_hub import snapshot_download
    try:
        path = snapshot_download(
            repo_id=entry.ref,
            revision=entry.revision,
            token=token,
            cache_dir=str(Path(cache_dir) / "hub"),
            allow_patterns=["*.json", "*.safetensors", "tokenizer*", "*.jinja", "*.txt", "*.model"],
        )
    except Exception as exc:  # classified below, raised from the cause
        name = type(exc).__name__
        if "Gated" in name or "401" in str(exc) or "403" in str(exc):
            raise HubAccessError(
                f"the hub refused {entry.ref} ({name}: {exc}). "
                + (
                    f"It is a gated model: accept its licence at https://huggingface.co/{entry.ref} with the "
                    "account whose token is in Secrets Manager, then re-run."
                    if entry.gated
                    else f"Check that the token in Secrets Manager is valid; if {entry.ref} is gated (a model outside "
                    f"the catalogue may be), accept its licence at https://huggingface.co/{entry.ref} with that "
                    "token's account."
                    if entry.name not in MODEL_CATALOGUE
                    else "Check that the token in Secrets Manager is valid."
                )
            ) from exc
        raise HubAccessError(f"downloading {entry.ref} failed: {name}: {exc}") from exc
    return Path(path)


def resolve_model(
    name: str,
    cache_dir: Path,
    profile: str | None = None,
    *,
    seed: int = 0,
    local_path: Path | None = None,
    secrets_client: Any = None,
    snapshot_download: Any = None,
) -> Path:
    """A local checkpoint directory for ``name``: the tiny factory, a given local path, or the hub."""
    entry = get_model(name)
    if local_path is not None:
        return Path(local_path)
    if entry.source == "tiny":
        from agents.training.tiny_models import ensure_tiny_model

        return ensure_tiny_model(entry.ref, Path(cache_dir), seed=seed)
    token = read_hub_token(client=secrets_client)
    return download_from_hub(entry, Path(cache_dir), token, snapshot_download)


def artifact_rows(
    name: str, root: Path, kind: str, stage: str, uri_prefix: str | None = None, memoize: bool = False
) -> list[dict]:
    """``artifacts`` rows for every file of a checkpoint directory.

    ``memoize`` keeps the hashes beside the directory (``.<dir>.sha256.json``) for read-only caches such
    as downloaded base models; never for directories being written.
    """
    root = Path(root)
    memo = root.parent / f".{root.name}.sha256.json" if memoize else None
    return [
        {
            "model": name,
            "kind": kind,
            "stage": stage,
            "path": f["path"],
            "uri": f"{uri_prefix.rstrip('/')}/{f['path']}" if uri_prefix else str(root / f["path"]),
            "bytes": f["bytes"],
            "sha256": f["sha256"],
        }
        for f in hash_tree(root, memo)
    ]


def base_artifact_rows(name: str, checkpoint: Path) -> list[dict]:
    """``artifacts`` rows (kind ``base``, stage ``download``) for a resolved base checkpoint, hashes memoized."""
    return artifact_rows(name, checkpoint, kind="base", stage="download", memoize=True)
