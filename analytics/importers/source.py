"""Read a results repository as it stood at one commit, or as a plain directory.

An importer reads files by path; it must not care whether they come from a
checkout's working tree or from a bare git directory (the usual form of a
mirror), and ``--history`` must read every earlier version of a file without
checking anything out. ``GitTree`` answers from git objects through one
``git cat-file --batch`` process; ``WorkTree`` from the file system.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


class SourceError(ValueError):
    """The SOURCE is not a readable results repository (one line, shown to the user)."""


class OutsideSourceError(SourceError):
    """A file to read that resolves outside the SOURCE (a symbolic link leaving it), or is no regular file."""


class RefError(SourceError):
    """A ``--ref`` that is not a ref name or a commit's hex id (one line, ``--ref: reason``)."""


_HEX_SHA = re.compile(r"[0-9a-f]{4,64}")
_ANCESTRY = re.compile(r"(?:[~^][0-9]{0,4})+$")  # HEAD~2, main^0: the commit's ancestors, after the name
_FORBIDDEN = frozenset(" ~^:?*[\\")


def _ref_name_problem(name: str) -> str | None:
    """Why ``name`` breaks git check-ref-format's rules (one level allowed), or None."""
    if not name.isascii() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a control or non-ASCII character"
    if bad := sorted({c for c in name if c in _FORBIDDEN}):
        return "the character " + " ".join(repr(c) for c in bad)
    for token in ("..", "@{", "//"):
        if token in name:
            return repr(token)
    if name == "@" or name.startswith("/") or name.endswith(("/", ".")):
        return "'@' alone, a leading or trailing '/', or a trailing '.'"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "a part starting with '.' or ending in '.lock'"
    return None


def check_ref(ref: str) -> str:
    """``ref`` itself when it is a ref name by git check-ref-format's rules (a branch, tag or HEAD; one level
    allowed), optionally followed by ``~N`` / ``^N``, or a commit's hex id; else :class:`RefError`. It never
    starts with '-', so git cannot read it as an option."""
    if not ref:
        raise RefError("--ref: the ref is empty")
    if ref.startswith("-"):
        raise RefError(f"--ref: {ref!r} starts with '-' (git would read it as an option)")
    if len(ref) > 255:
        raise RefError(f"--ref: a ref of {len(ref)} characters (at most 255)")
    ancestry = _ANCESTRY.search(ref)
    name = ref[: ancestry.start()] if ancestry else ref
    problem = "nothing before the ~ or ^" if not name else None if _HEX_SHA.fullmatch(name) else _ref_name_problem(name)
    if problem:
        raise RefError(
            f"--ref: {ref!r} is not a ref name (a branch, tag or HEAD, optionally ~N or ^N) or a "
            f"commit's hex id: it holds {problem}"
        )
    return ref


@dataclass(frozen=True)
class Commit:
    sha: str
    committed_at: str  # ISO 8601 with offset, as git prints %cI


class Tree:
    """Files under a few top-level folders, read by repository-relative path."""

    commit: str | None = None
    committed_at: str | None = None
    telemetry: bool = True  # False: skip telemetry CSVs (superseded versions under --history)

    def nulled(self) -> dict[str, list[str]]:
        """path -> fields whose NaN was read as NULL (``importers.common.load_json``; named in lane_runs)."""
        if "_nulled" not in self.__dict__:
            self._nulled: dict[str, list[str]] = {}
        return self._nulled

    def not_followed(self) -> dict[str, str]:
        """path -> why no file was read through this link (named in lane_runs and printed by the import)."""
        if "_links_not_followed" not in self.__dict__:
            self._links_not_followed: dict[str, str] = {}
        return self._links_not_followed

    def dropped(self) -> dict[str, str]:
        """path -> why a file read gave no rows (a telemetry CSV that holds no telemetry; named in lane_runs
        and printed by the import)."""
        if "_dropped" not in self.__dict__:
            self._dropped: dict[str, str] = {}
        return self._dropped

    def fingerprint(self, paths: list[str]) -> str:
        """Identity of these files' contents (equal fingerprints: nothing changed)."""
        import hashlib

        h = hashlib.sha256()
        for p in sorted(paths):
            h.update(p.encode() + b"\0" + self.oid(p).encode() + b"\n")
        return h.hexdigest()

    def oid(self, path: str) -> str:
        import hashlib

        return hashlib.sha1(self.read(path)).hexdigest()

    def files(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        return path in set(self.files(path.rsplit("/", 1)[0] + "/" if "/" in path else ""))

    def text(self, path: str) -> str:
        return self.read(path).decode("utf-8", errors="replace")

    def uri(self, path: str) -> str:
        return f"git:{self.commit}:{path}" if self.commit else path


class WorkTree(Tree):
    """A directory as it is. A symbolic link to a directory is never followed (it is named in :meth:`not_followed`);
    a link to a file is read only when it resolves inside the root (:class:`OutsideSourceError` else)."""

    def __init__(self, root: Path):
        self.root = root

    def _skip_link(self, link: str) -> None:
        target = os.readlink(link)
        rel = Path(link).relative_to(self.root).as_posix()
        self.not_followed()[rel] = f"a symbolic link to a directory ({target}), not followed"

    def files(self, prefix: str) -> list[str]:
        base = self.root / prefix
        start = base if prefix.endswith("/") or base.is_dir() else base.parent
        at = self.root
        for part in start.relative_to(self.root).parts:
            at = at / part
            if at.is_symlink():
                if at.is_dir():
                    self._skip_link(str(at))
                return []
        if not start.is_dir():
            return []
        out = []
        for dirpath, dirnames, filenames in os.walk(start):  # never into a linked directory
            for name in dirnames:
                if os.path.islink(os.path.join(dirpath, name)):
                    self._skip_link(os.path.join(dirpath, name))
            for name in filenames:
                path = os.path.join(dirpath, name)
                if os.path.isfile(path):  # a regular file, or a link to one (read() checks where it leads)
                    out.append(Path(path).relative_to(self.root).as_posix())
        return sorted(p for p in out if p.startswith(prefix))

    def read(self, path: str) -> bytes:
        real = (self.root / path).resolve()
        if not real.is_relative_to(self.root):
            raise OutsideSourceError(
                f"{self.uri(path)}: a symbolic link to {real}, outside the SOURCE "
                f"{self.root}: a result file must be inside the SOURCE"
            )
        if not real.is_file():
            raise OutsideSourceError(f"{self.uri(path)}: not a regular file")
        return real.read_bytes()

    def uri(self, path: str) -> str:
        return str(self.root / path)


REGULAR_MODES = ("100644", "100755")  # git's modes of a regular file (120000 is a symbolic link)


class GitRepo:
    """One git directory (bare, or a checkout's .git) and a long-lived object reader."""

    def __init__(self, git_dir: Path):
        self.git_dir = git_dir
        self._batch: subprocess.Popen[bytes] | None = None
        self._listing: dict[str, dict[str, str]] = {}
        self._links: dict[str, list[str]] = {}

    def git(self, *args: str, quiet_failure: bool = False) -> str:
        """git's stdout; a failure is :class:`SourceError` with git's words (``quiet_failure``: "" instead)."""
        try:
            done = subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True, check=False)
        except FileNotFoundError:
            raise SourceError("git is not installed: it is needed to read a git SOURCE") from None
        if done.returncode != 0 and quiet_failure:
            return ""
        if done.returncode != 0:
            msg = " ".join(done.stderr.decode(errors="replace").split()) or f"git {args[0]} failed"
            raise SourceError(f"{self.git_dir}: {msg}")
        return done.stdout.decode("utf-8", errors="replace")

    def resolve(self, ref: str) -> Commit:
        """The commit ``ref`` names (:func:`check_ref` first; the ref reaches git after --end-of-options)."""
        check_ref(ref)
        sha = self.git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", quiet_failure=True
        ).strip()
        if not _HEX_SHA.fullmatch(sha):
            raise SourceError(f"{self.git_dir}: {ref!r} names no commit")
        out = self.git("log", "-1", "--format=%H %cI", "--end-of-options", sha, "--").split()
        if len(out) != 2:
            raise SourceError(f"{self.git_dir}: {ref!r} names no commit")
        return Commit(out[0], out[1])

    def history(self, ref: str, paths: list[str]) -> list[Commit]:
        """Commits reachable from ``ref`` that touched ``paths``, oldest first."""
        check_ref(ref)
        text = self.git("log", "--reverse", "--format=%H %cI", "--end-of-options", ref, "--", *paths)
        return [Commit(*line.split()) for line in text.splitlines() if line.strip()]

    def listing(self, commit: str) -> dict[str, str]:
        """path -> blob id of every regular file in ``commit`` (its symbolic links: :meth:`links`)."""
        if commit not in self._listing:
            out: dict[str, str] = {}
            links: list[str] = []
            for line in self.git("ls-tree", "-r", "--end-of-options", commit).splitlines():
                meta, _, path = line.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob" and parts[0] in REGULAR_MODES:
                    out[path] = parts[2]
                elif len(parts) == 3 and parts[1] == "blob":
                    links.append(path)
            self._listing[commit] = dict(sorted(out.items()))
            self._links[commit] = sorted(links)
        return self._listing[commit]

    def links(self, commit: str) -> list[str]:
        """The paths in ``commit`` that git holds as symbolic links: no file is read through them."""
        self.listing(commit)
        return self._links[commit]

    def read(self, commit: str, path: str) -> bytes:
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "--git-dir", str(self.git_dir), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert self._batch.stdin and self._batch.stdout
        self._batch.stdin.write(f"{commit}:{path}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) != 3:
            raise FileNotFoundError(f"{commit}:{path}")
        body = self._batch.stdout.read(int(header[2]))
        self._batch.stdout.read(1)  # the newline after each object
        return body

    def close(self) -> None:
        if self._batch is not None:
            if self._batch.stdin:
                self._batch.stdin.close()
            self._batch.wait(timeout=30)
            self._batch = None


class GitTree(Tree):
    def __init__(self, repo: GitRepo, commit: Commit):
        self.repo = repo
        self.commit = commit.sha
        self.committed_at = commit.committed_at

    def files(self, prefix: str) -> list[str]:
        for link in self.repo.links(self.commit):
            if link.startswith(prefix):
                self.not_followed()[link] = "a symbolic link in git, not read"
        return [p for p in self.repo.listing(self.commit) if p.startswith(prefix)]

    def oid(self, path: str) -> str:
        return self.repo.listing(self.commit)[path]

    def read(self, path: str) -> bytes:
        return self.repo.read(self.commit, path)


def find_git_dir(path: Path) -> Path | None:
    """``path`` itself when it is a bare git dir, ``path/.git`` for a checkout, else None."""
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    dot = path / ".git"
    if dot.is_dir() and (dot / "objects").is_dir():
        return dot
    return None


def open_tree(source: str, ref: str | None = None) -> tuple[Tree, GitRepo | None]:
    """The tree to import. A git dir (bare or a checkout's) is read at ``ref`` (default HEAD); a plain
    directory is read as it is (and has no history)."""
    if ref is not None:
        check_ref(ref)
    path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"SOURCE {source} does not exist")
    if not path.is_dir():
        raise SourceError(f"SOURCE {source} is not a directory (give a checkout or a bare git dir)")
    git_dir = find_git_dir(path)
    if git_dir is None:
        if ref is not None:
            raise SourceError(f"SOURCE {source} is not a git repository: --ref needs one")
        return WorkTree(path.resolve()), None
    repo = GitRepo(git_dir.resolve())
    return GitTree(repo, repo.resolve("HEAD" if ref is None else ref)), repo
