"""Run the tribuild CLI and SIGKILL it just before its Nth file-system change.

``python -m tests.reliability.killer N ARGS...`` runs ``tribuild ARGS`` in this process with
the calls that change the file system wrapped: ``os.open`` for writing, ``os.replace``,
``os.rename``, ``os.unlink``, ``os.rmdir``, ``os.chmod``, ``os.ftruncate``, ``os.fsync`` and
``os.sync``. Each such call is a *kill point*: the process kills itself with SIGKILL (no
handler, no ``finally`` runs) just before the Nth one (of this process: its workers' calls
are not counted). With N = 0 it never kills and writes
the number of kill points it passed to the file named by ``TRIBUILD_KILL_COUNT``.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys

_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_CALLS = ("replace", "rename", "unlink", "rmdir", "chmod", "ftruncate", "fsync", "sync")


def install(kill_at: int) -> list[int]:
    """Wrap the calls; returns the one-item list counting kill points passed. Only this
    process counts: a worker it forks (``--jobs``) inherits the wrappers but passes no kill
    point, so N names one moment of the build's own process."""
    count = [0]
    me = os.getpid()

    def point() -> None:
        if os.getpid() != me:
            return
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(fn, writes=lambda *a, **k: True):
        def wrapped(*args, **kwargs):
            if writes(*args, **kwargs):
                point()
            return fn(*args, **kwargs)

        return wrapped

    for name in _CALLS:
        setattr(os, name, wrap(getattr(os, name)))
    os.open = wrap(os.open, lambda path, flags, *a, **k: bool(flags & _WRITES))
    return count


def main() -> int:
    kill_at = int(sys.argv[1])
    count = install(kill_at)
    report = os.environ.get("TRIBUILD_KILL_COUNT")
    if report:
        atexit.register(lambda: open(report, "w").write(str(count[0])))
    from tribuild.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
