"""Boxes: each project instance is a sandbox directory on this machine with its own loopback IMDSv2.

A box's root (``NEURONPIPE_BOX_ROOT``) prefixes every absolute path its scripts touch (``/opt/neuronpipe``,
``/etc/neuronpipe``, ``/usr/local/bin``, ...). Its IMDS answers instance-id, instance-type, ami-id, placement and
``iam/security-credentials/<role>`` (the box actor's credentials), tokens required as on a box with
``HttpTokens=required``. The harness venv ``<root>/opt/neuronpipe/.venv`` is created here (the sync script would
create it the same way) with one path line to this interpreter's site-packages, so the third-party stack is
there without a download; the harness itself (first-party code) comes only from the bucket, installed by
``neuronpipe-sync``. ``aws`` is the AWS CLI at ``<root>/usr/local/bin/aws``, where the DLAMI has it.

Boot: the first boot runs the instance's user data (the bootstrap, rendered by the CDK app); every later boot
runs ``<root>/var/lib/cloud/scripts/per-boot/*`` as cloud-init does. What needs root (mkfs, mount, swap,
shutdown) is skipped by the scripts themselves when ``NEURONPIPE_BOX_ROOT`` is set.
"""

from __future__ import annotations

import json
import secrets
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rehearsal import spawn
from rehearsal.world import Credentials

HARNESS_HOME = "opt/neuronpipe"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMDS_CLIENT_TIMEOUT_S = 10  # AWS_METADATA_SERVICE_TIMEOUT of the box's processes (botocore: whole seconds)
IMDS_CLIENT_ATTEMPTS = 5  # AWS_METADATA_SERVICE_NUM_ATTEMPTS


class BootError(RuntimeError):
    """A boot script of a box failed (the message holds its exit status and output tail)."""


@dataclass(frozen=True)
class BoxIdentity:
    instance_id: str
    box_role: str
    instance_type: str
    ami_id: str
    region: str
    availability_zone: str
    iam_role: str


class Imds:
    """IMDSv2 on loopback for one box: PUT a token, then GET with it."""

    def __init__(self, identity: BoxIdentity, credentials: Callable[[], Credentials]):
        self.identity, self.credentials = identity, credentials
        self._tokens: set[str] = set()
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, code: int, body: str, ctype: str = "text/plain") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._send(400, "Bad Request")
                    return
                token = secrets.token_urlsafe(24)
                imds._tokens.add(token)
                self._send(200, token)

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") not in imds._tokens:
                    self._send(401, "Unauthorized")
                    return
                found = imds.answer(self.path)
                if found is None:
                    self._send(404, "Not Found")
                else:
                    self._send(200, found, "application/json" if found.startswith("{") else "text/plain")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name=f"imds-{identity.instance_id}"
        )
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str) -> str | None:
        i = self.identity
        meta = {
            "instance-id": i.instance_id,
            "instance-type": i.instance_type,
            "ami-id": i.ami_id,
            "placement/region": i.region,
            "placement/availability-zone": i.availability_zone,
            "iam/security-credentials/": i.iam_role,
            "iam/security-credentials": i.iam_role,
            "hostname": f"ip-10-42-0-1.{i.region}.compute.internal",
            "local-ipv4": "10.42.0.1",
        }
        if path.startswith("/latest/meta-data/"):
            key = path.removeprefix("/latest/meta-data/")
            if key == f"iam/security-credentials/{i.iam_role}":
                c = self.credentials()
                now = datetime.now(timezone.utc)
                return json.dumps(
                    {
                        "Code": "Success",
                        "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "Type": "AWS-HMAC",
                        "AccessKeyId": c.access_key_id,
                        "SecretAccessKey": c.secret_access_key,
                        "Token": c.session_token,
                        "Expiration": (now + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                )
            return meta.get(key)
        if path == "/latest/dynamic/instance-identity/document":
            return json.dumps(
                {
                    "instanceId": i.instance_id,
                    "instanceType": i.instance_type,
                    "imageId": i.ami_id,
                    "region": i.region,
                    "availabilityZone": i.availability_zone,
                    "accountId": "123456789012",
                    "architecture": "x86_64",
                }
            )
        return None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Box:
    """One emulated instance: sandbox root, IMDS, the environment its agent and boot scripts run in."""

    identity: BoxIdentity
    root: Path
    endpoint_url: str  # the moto server
    credentials_for: Callable[[], Credentials]
    extra_env: dict[str, str] = field(default_factory=dict)
    imds: Imds | None = None
    boots: int = 0
    fake_dlami: bool = True  # lay down rehearsal.dlami's fake Neuron DLAMI under the root (found by the per-boot setup)

    @property
    def instance_id(self) -> str:
        return self.identity.instance_id

    @property
    def venv(self) -> Path:
        return self.root / HARNESS_HOME / ".venv"

    def credentials(self) -> Credentials:
        return self.credentials_for()

    def prepare(self, python: str | None = None) -> Box:
        """Sandbox dirs, the harness venv (with the path line), the ``aws`` CLI, the fake DLAMI, the IMDS."""
        for d in (
            "etc",
            "opt",
            "run",
            "tmp",
            "root",
            "usr/local/bin",
            "var/lib/cloud/scripts/per-boot",
            "var/log",
            "var/cache",
        ):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        if not (self.venv / "bin" / "python").exists():
            base = python or getattr(sys, "_base_executable", sys.executable)
            spawn.run(
                [base, "-m", "venv", "--without-pip", str(self.venv)],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
            site = spawn.run(
                [str(self.venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
            # the test venv's third-party packages (a path line: its .pth files, e.g. the editable
            # install of this repository, are NOT processed, so first-party code must come from the bucket)
            Path(site, "zz_rehearsal_third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        aws = self.root / "usr/local/bin/aws"
        spawn.write_executable(
            aws, f"#!{self.venv / 'bin' / 'python'}\nimport sys\nfrom awscli.clidriver import main\nsys.exit(main())\n"
        )
        if self.fake_dlami:  # the DLAMI's venvs and CLIs as files: the preflight gate checks them for real
            from rehearsal.dlami import build_dlami

            build_dlami(self.root, self.identity.box_role, self.identity.instance_type)
        if self.imds is None:
            self.imds = Imds(self.identity, self.credentials_for)
        return self

    def agent_env(self) -> dict[str, str]:
        """What a process of the box's SSM agent (root, systemd) sees, plus the rehearsal's pointers."""
        assert self.imds is not None, "prepare() the box first"
        env = {
            "PATH": f"{self.root}/usr/local/bin:{SYSTEM_PATH}",
            "HOME": str(self.root / "root"),
            "LANG": "C.UTF-8",
            "AWS_SSM_INSTANCE_ID": self.instance_id,
            "AWS_SSM_REGION_NAME": self.identity.region,
            # the rehearsal's pointers: sandbox root, loopback IMDS, the moto server
            "NEURONPIPE_BOX_ROOT": str(self.root),
            "NEURONPIPE_IMDS_ENDPOINT": self.imds.endpoint,
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.imds.endpoint,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            # this IMDS answers from the rehearsal's own (busy) process, not from the hypervisor: botocore's
            # default (1 s, 1 attempt) gives up on it under CPU load and the box's `aws`/boto3 then fail with
            # "Unable to locate credentials" (a sync or lane failing for the emulation, not for the pipeline)
            "AWS_METADATA_SERVICE_TIMEOUT": str(IMDS_CLIENT_TIMEOUT_S),
            "AWS_METADATA_SERVICE_NUM_ATTEMPTS": str(IMDS_CLIENT_ATTEMPTS),
            "NEURONPIPE_SYNC_SKIP_REQUIREMENTS": "1",
            # the box is this machine's CPU: lanes measure what a CPU can (the Neuron stack is not here)
            "NEURONPIPE_BACKEND": "cpu",
            "TMPDIR": str(self.root / "tmp"),
        }
        env.update(self.extra_env)
        return env

    def run_boot_script(self, script: Path, timeout_s: float = 900) -> str:
        """Run one boot script as cloud-init would (exec'd: its shebang picks the shell)."""
        proc = spawn.run(
            [str(script)],
            cwd=self.root,
            env=self.agent_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
        )
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise BootError(
                f"{self.identity.box_role} box {self.instance_id}: {script.name} exited "
                f"{proc.returncode}:\n{_tail(out)}{_tail(self._logs())}"
            )
        return out

    def first_boot(self, user_data: str, timeout_s: float = 900) -> str:
        """The user data (first boot only)."""
        path = self.root / "var/lib/cloud/instance/scripts/part-001"
        path.parent.mkdir(parents=True, exist_ok=True)
        spawn.write_executable(path, user_data)
        self.boots += 1
        return self.run_boot_script(path, timeout_s)

    def boot(self, timeout_s: float = 900) -> str:
        """Every later boot: the per-boot scripts, in order."""
        self.boots += 1
        out = []
        for script in sorted((self.root / "var/lib/cloud/scripts/per-boot").iterdir()):
            if script.is_file() and script.stat().st_mode & 0o111:
                out.append(self.run_boot_script(script, timeout_s))
        return "".join(out)

    def _logs(self) -> str:
        logs = sorted((self.root / "var/log").glob("neuronpipe-*.log"))
        return "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')}" for p in logs)

    def close(self) -> None:
        if self.imds is not None:
            self.imds.close()
            self.imds = None


def _tail(text: str, limit: int = 3000) -> str:
    return text[-limit:]
