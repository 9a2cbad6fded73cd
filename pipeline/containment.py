"""Where a name from outside may land: an S3 key, a manifest's file, a commit marker's key or an archive member
becomes a local path only through :func:`contained`, which keeps it inside the directory it is written into.

A box is untrusted, and so is every name it (or anything else with write access to the bucket) can leave behind.
The rule is on the name's text first — ``/``-separated parts, none empty, ``.`` or ``..``, not absolute, no NUL —
then on where it resolves, so a symlink already in the directory cannot carry it out. A backslash is an ordinary
character on the box's file system and stays one.
"""

from __future__ import annotations

from pathlib import Path


class PathEscapeError(ValueError):
    """A name would land outside the directory it is written into; the message names it and says why."""


def refusal(relative: str) -> str | None:
    """Why ``relative`` is not a plain ``/``-separated relative name (None: it is one)."""
    if not isinstance(relative, str):
        return f"not a string ({type(relative).__name__})"
    if not relative:
        return "empty name"
    if "\0" in relative:
        return "contains NUL"
    if relative.startswith("/"):
        return "absolute"
    for part in relative.split("/"):
        if part in ("", ".", ".."):
            return "empty part" if not part else f"a {part!r} part"
    return None


def contained(dest: Path, relative: str) -> Path:
    """The resolved path of ``relative`` under the resolved ``dest`` (which need not exist yet).

    Raises :class:`PathEscapeError` naming ``relative`` when it is absolute, has an empty, ``.`` or ``..`` part,
    holds a NUL, or resolves (through symlinks already under ``dest``) to ``dest`` itself or outside it."""
    why = refusal(relative)
    if why is not None:
        raise PathEscapeError(f"{relative!r}: {why}")
    root = Path(dest).resolve()
    target = (root / relative).resolve()
    if root not in target.parents:
        raise PathEscapeError(f"{relative!r}: resolves to {target}, outside {root}")
    return target
