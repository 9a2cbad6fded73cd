"""Lambdas as deployed: the staged code plus exactly the layer's packages, one worker process per function.

The layer is built offline from this interpreter's installed distributions: the requirements of
``infra/lambda-requirements.txt`` and their dependency closure (markers and extras evaluated), plus what the
Lambda Python runtime provides (boto3, botocore, s3transfer, jmespath, urllib3, dateutil, six), each
distribution's files symlinked into one directory. A worker (``lambda_worker.py``) runs ``python -I -S``
with ``sys.path`` = stdlib + code + layer, so a handler importing anything else fails with
``ModuleNotFoundError`` exactly as it would in AWS. Environment: the function's resolved ``Environment``,
the actor's credentials, the moto endpoint.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from infra.bundling import LAMBDA_REQUIREMENTS, RUNTIME_PROVIDED
from rehearsal import spawn

WORKER = Path(__file__).with_name("lambda_worker.py")
RUNTIME_DISTRIBUTIONS = {"dateutil": "python-dateutil"}


class LayerBuildError(RuntimeError):
    """A package of the layer is not installed here (the layer cannot be built offline)."""


class LambdaInvokeError(RuntimeError):
    """The worker died or ran past the function's timeout."""


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def layer_distributions(requirements: Path = LAMBDA_REQUIREMENTS) -> list[metadata.Distribution]:
    """The installed distributions the layer holds: requirements' closure plus the runtime-provided ones."""
    from packaging.requirements import Requirement

    todo: list[tuple[str, frozenset[str]]] = []
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            todo.append((req.name, frozenset(req.extras)))
    todo += [(RUNTIME_DISTRIBUTIONS.get(n, n), frozenset()) for n in RUNTIME_PROVIDED]
    seen: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (_canon(name), extras) in done:
            continue
        done.add((_canon(name), extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise LayerBuildError(f"the layer needs {name!r}, which is not installed here") from None
        seen[_canon(name)] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(e) for e in envs):
                todo.append((req.name, frozenset(req.extras)))
    return sorted(seen.values(), key=lambda d: _canon(d.metadata["Name"]))


def build_layer(dest_root: Path, requirements: Path = LAMBDA_REQUIREMENTS) -> Path:
    """``<dest_root>/<digest>/python``: symlinks to every file of the layer's distributions (cached by digest)."""
    dists = layer_distributions(requirements)
    digest = hashlib.sha256(
        "\n".join(f"{d.metadata['Name']}=={d.version}@{d.locate_file('')}" for d in dists).encode()
    ).hexdigest()[:16]
    site = dest_root / digest / "python"
    if (site.parent / "complete").is_file():
        return site
    if site.exists():
        shutil.rmtree(site)
    for dist in dists:
        base = Path(str(dist.locate_file(""))).resolve()
        for rel in dist.files or []:
            if str(rel).startswith("..") or rel.suffix == ".pyc":
                continue
            src = (base / rel).resolve()
            if not src.is_file():
                continue
            target = site / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(src)
    (site.parent / "complete").write_text("\n".join(f"{d.metadata['Name']}=={d.version}" for d in dists) + "\n")
    return site


@dataclass
class LambdaFunction:
    """One deployed function and its warm worker (started on first invocation, like a cold start)."""

    name: str
    arn: str
    handler: str
    code_dir: Path
    layer_dir: Path
    environment: dict[str, str]
    timeout_s: float = 60.0
    memory_mb: int = 128
    log_path: Path | None = None
    invocations: list[dict[str, Any]] = field(default_factory=list)
    _proc: subprocess.Popen | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    init_sys_path: list[str] = field(default_factory=list)

    def _start(self) -> subprocess.Popen:
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": str(self.code_dir),
            "AWS_LAMBDA_FUNCTION_NAME": self.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.14",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.name}",
            **self.environment,
        }
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        proc = spawn.popen(
            [sys.executable, "-I", "-S", str(WORKER), str(self.code_dir), str(self.layer_dir), self.handler],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        ready = json.loads(proc.stdout.readline() or "{}")
        if not ready.get("ready"):
            proc.kill()
            raise LambdaInvokeError(f"{self.name}: the worker did not start (see {self.log_path})")
        self.init_sys_path = ready.get("sys_path", [])
        return proc

    def invoke(self, event: Any) -> tuple[Any, dict[str, Any] | None]:
        """(result, None) or (None, {errorType, errorMessage, stackTrace}) as Lambda reports them."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            request = {
                "event": event,
                "request_id": str(uuid.uuid4()),
                "function_arn": self.arn,
                "deadline_ms": time.time() * 1000 + self.timeout_s * 1000,
            }
            started = time.monotonic()
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = _readline(proc, self.timeout_s)
            record: dict[str, Any] = {"function": self.name, "event": event, "wall_s": time.monotonic() - started}
            if line is None:
                self.close()
                error = {
                    "errorType": "Sandbox.Timedout",
                    "stackTrace": [],
                    "errorMessage": f"Task timed out after {self.timeout_s:.2f} seconds",
                }
                record["error"] = error
                self.invocations.append(record)
                return None, error
            answer = json.loads(line)
            record.update(answer)
            self.invocations.append(record)
            return answer.get("result"), answer.get("error")

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None


def _readline(proc: subprocess.Popen, timeout_s: float) -> str | None:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout_s)
    return out[0] if out and out[0] else None


@dataclass
class LambdaFleet:
    """The deployed functions by name and ARN; the world's ``lambda:Invoke`` hook lands here."""

    functions: dict[str, LambdaFunction] = field(default_factory=dict)
    _ids: Any = field(default_factory=itertools.count)

    def add(self, fn: LambdaFunction) -> None:
        self.functions[fn.name] = fn

    def find(self, name_or_arn: str) -> LambdaFunction | None:
        name = name_or_arn.split(":function:", 1)[1].split(":", 1)[0] if ":function:" in name_or_arn else name_or_arn
        return self.functions.get(name)

    def invoke_hook(self, name_or_arn: str, payload: bytes) -> tuple[bytes, str | None]:
        from rehearsal.world import AwsError

        fn = self.find(name_or_arn)
        if fn is None:
            raise AwsError("ResourceNotFoundException", f"Function not found: {name_or_arn}", 404)
        result, error = fn.invoke(json.loads(payload or b"null"))
        if error is not None:
            return json.dumps(error).encode(), "Unhandled"
        return json.dumps(result).encode(), None

    def close(self) -> None:
        for fn in self.functions.values():
            fn.close()


def environment_for(function_env: dict[str, str], credentials_env: dict[str, str]) -> dict[str, str]:
    """The function's environment: its template Variables, then credentials and endpoint (which Lambda sets)."""
    env = dict(function_env)
    env.update(credentials_env)
    env.setdefault("POWERTOOLS_TRACE_DISABLED", "true")  # no X-Ray daemon here (listed as not checked)
    return env


def path_is_isolated(sys_path: list[str], code_dir: Path, layer_dir: Path) -> bool:
    """True when a worker's path is the standard library, the code and the layer: no site-packages of ours."""
    return (
        str(code_dir) in sys_path
        and str(layer_dir) in sys_path
        and not any("site-packages" in p and not p.startswith(str(layer_dir)) for p in sys_path)
    )
