"""GNU make's jobserver: under ``make -jN`` tribuild's extra workers take make's job slots.

Terms:
- *jobserver*: make passes ``--jobserver-auth=R,W`` (a pipe, two inherited file
  descriptors; make up to 4.3) or ``--jobserver-auth=fifo:PATH`` (a named pipe; make 4.4)
  in ``MAKEFLAGS``. Each byte in it is a *token*: the right to run one more job.
- *implicit slot*: the job make started us in. The first worker uses it; every further
  worker reads one token first and writes that same byte back when it ends.
- Tokens are taken without blocking: if make has none free, tribuild runs with fewer
  workers rather than wait (the build is the same whatever the number of workers).
- A MAKEFLAGS naming descriptors that are not open (a recipe line make did not mark as
  recursive with ``+``) gives no jobserver: tribuild then uses its own ``--jobs``.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


class Slots:
    """Permission to run workers beyond the first, at most ``extra`` at once."""

    def __init__(self, extra: int):
        self.extra = extra
        self.held: list[bytes] = []

    def acquire(self) -> bool:
        if len(self.held) >= self.extra:
            return False
        token = self._take()
        if token is None:
            return False
        self.held.append(token)
        return True

    def release(self) -> None:
        self._give(self.held.pop())

    def close(self) -> None:
        while self.held:
            self.release()

    def _take(self) -> bytes | None:
        return b"+"

    def _give(self, token: bytes) -> None:
        pass


class MakeSlots(Slots):
    """Slots backed by make's jobserver. An inherited pipe is shared with make, so it is
    made non-blocking only for the moment of one read (a fifo is opened privately)."""

    def __init__(self, extra: int, read_fd: int, write_fd: int, owned: bool):
        super().__init__(extra)
        self.read_fd, self.write_fd, self.owned = read_fd, write_fd, owned

    def _take(self) -> bytes | None:
        blocking = os.get_blocking(self.read_fd)
        os.set_blocking(self.read_fd, False)
        try:
            return os.read(self.read_fd, 1) or None
        except (BlockingIOError, InterruptedError):
            return None
        finally:
            if blocking:
                os.set_blocking(self.read_fd, True)

    def _give(self, token: bytes) -> None:
        os.write(self.write_fd, token)

    def close(self) -> None:
        super().close()
        if self.owned:
            os.close(self.read_fd)


def auth(makeflags: str) -> str | None:
    """The value of the last ``--jobserver-auth=`` (or older ``--jobserver-fds=``)."""
    found = None
    for word in makeflags.split():
        for prefix in ("--jobserver-auth=", "--jobserver-fds="):
            if word.startswith(prefix):
                found = word[len(prefix) :]
    return found


def slots(jobs: int, environ: Mapping[str, str] = os.environ) -> Slots:
    """The slots for ``jobs`` workers: make's jobserver's when there is one."""
    value = auth(environ.get("MAKEFLAGS", ""))
    if value is None or jobs <= 1:
        return Slots(jobs - 1)
    try:
        if value.startswith("fifo:"):
            fd = os.open(value[5:], os.O_RDWR | os.O_NONBLOCK)
            return MakeSlots(jobs - 1, fd, fd, owned=True)
        read_fd, write_fd = (int(part) for part in value.split(","))
        if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (read_fd, write_fd)):
            return Slots(jobs - 1)  # closed by make and reused for something else
        return MakeSlots(jobs - 1, read_fd, write_fd, owned=False)
    except (OSError, ValueError):
        return Slots(jobs - 1)
