"""The rehearsal's processes and the scripts it writes, so that a script it has just written always executes.

The rehearsal is one process with many threads: each emulated box's first boot, its SSM agent and the emulated
Lambdas start processes while other threads write the scripts those processes run. A child forked while another
thread still has a script open for writing inherits that file descriptor until the child execs (``O_CLOEXEC``
closes it only then); executing the script in that window fails with ``ETXTBSY`` ("Text file busy"). On a
starved 2-core machine the window is long enough to hit (CI: a box's first boot failed that way).

Writing an executable and starting a process both hold one process-wide lock here. ``subprocess.Popen`` returns
only once the child has exec'd (or failed to), so when the lock is released no child holds a descriptor of a
script being written, and no script is open for writing while a child is being forked. Every process the
rehearsal starts goes through :func:`popen` or :func:`run` (``tests/rehearsal/test_spawn.py`` checks that no
module here calls ``subprocess`` directly).
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

_SPAWN_LOCK = threading.Lock()


def write_executable(path: Path, text: str, mode: int = 0o755) -> None:
    """Write ``text`` to ``path`` and make it executable, never while a child is being forked."""
    with _SPAWN_LOCK:
        path.write_text(text)
        path.chmod(mode)


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen``, started while no script is open for writing in this process."""
    with _SPAWN_LOCK:
        return subprocess.Popen(args, **kwargs)


def run(
    args: list[str],
    *,
    input: Any = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess:
    """``subprocess.run`` (same results, same exceptions), the child started by :func:`popen`."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = popen(args, **kwargs)
    with proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            exc.stdout, exc.stderr = proc.communicate()
            raise
        except BaseException:
            proc.kill()
            raise
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done
