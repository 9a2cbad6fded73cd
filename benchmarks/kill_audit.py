"""Kill audit of `neuronpipe run --local`: kill the CLI at random moments, then check what the store says.

Each try starts `run --local` on a few quick lanes against a fresh results directory, kills the CLI after a
random delay with SIGTERM, SIGINT or SIGKILL, and then checks three things:

* **orphans**: no `run-lane` process of that run survives the kill, checked by pid after a short grace;
* **late commits**: nothing is committed after the kill (the markers seen 3 s after the kill are the markers
  seen at the kill, plus at most the one a lane was writing at that instant);
* **resume**: running the same command again finishes the run with exit 0;
* **exit code**: SIGINT and SIGTERM end the CLI with 128 + the signal, 130 and 143 (or 0 when the run had already
  finished), never with a crash of its own (e.g. -6, an abort at interpreter exit).

It prints one line per try and a summary: tries, clean, orphans, late commits, failed resumes.
Not a test (it takes minutes): `python benchmarks/kill_audit.py [--tries 12] [--lanes provenance,host_cpu]`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)


def run_lane_pids(run_id: str) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run-lane" in cmd and run_id.encode() in cmd:
            out.append(int(proc.name))
    return out


def committed(results: Path, run_id: str) -> set[str]:
    return (
        {p.name for p in (results / "v1" / "_commits" / f"run_id={run_id}").rglob("*.json")}
        if (results / "v1" / "_commits" / f"run_id={run_id}").exists()
        else set()
    )


def cli(results: Path, run_id: str, lanes: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "control_plane.cli",
        "run",
        "--local",
        "--no-live",
        "--lanes",
        lanes,
        "--run-id",
        run_id,
        "--results",
        str(results),
    ]


def one_try(i: int, lanes: str, max_delay: float, rng: random.Random) -> dict:
    results = Path(tempfile.mkdtemp(prefix="kill-audit-"))
    run_id = f"kill-{i:03d}"
    sig = SIGNALS[i % len(SIGNALS)]
    delay = rng.uniform(0.5, max_delay)
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true"}
    proc = subprocess.Popen(cli(results, run_id, lanes), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(delay)
    at_kill = committed(results, run_id)
    proc.send_signal(sig)
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    time.sleep(3.0)
    orphans = run_lane_pids(run_id)
    for pid in orphans:
        os.kill(pid, signal.SIGKILL)
    late = committed(results, run_id) - at_kill
    resume = subprocess.run(cli(results, run_id, lanes), capture_output=True, text=True, env=env, timeout=600)
    final = committed(results, run_id)
    return {
        "try": i,
        "signal": sig.name,
        "delay_s": round(delay, 2),
        "exit": proc.returncode,
        "orphans": len(orphans),
        "late_commits": len(late) > 1,
        "late": sorted(late),
        "resume_ok": resume.returncode == 0,
        "markers": len(final),
        "exit_ok": sig == signal.SIGKILL or proc.returncode in (128 + sig, 0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=12)
    ap.add_argument("--lanes", default="provenance,host_cpu")
    ap.add_argument("--max-delay-s", type=float, default=12.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = [one_try(i, args.lanes, args.max_delay_s, rng) for i in range(args.tries)]
    for r in rows:
        print(
            f"try {r['try']:3d} {r['signal']:8s} after {r['delay_s']:5.2f} s: exit {r['exit']}, orphans "
            f"{r['orphans']}, committed after the kill {r['late'] or 'nothing'}, resume "
            f"{'ok' if r['resume_ok'] else 'FAILED'}"
        )
    clean = [r for r in rows if not r["orphans"] and not r["late_commits"] and r["resume_ok"] and r["exit_ok"]]
    print(
        f"kills tried {len(rows)}, clean {len(clean)}, with orphans {sum(1 for r in rows if r['orphans'])}, "
        f"with late commits {sum(1 for r in rows if r['late_commits'])}, "
        f"failed resumes {sum(1 for r in rows if not r['resume_ok'])}, "
        f"wrong exit codes {sum(1 for r in rows if not r['exit_ok'])}"
    )
    return 0 if len(clean) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
