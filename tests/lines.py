"""A child process's pipe read line by line with a deadline, for the tests that signal a child
and wait for what it prints.

Terms:
- *deadline*: how long a test waits for the next line (or for the end of the stream) before
  it fails saying what it waited for. A plain ``readline`` waits for ever: a child that
  never reacts to its signal hung the test instead of failing it. That is what SIGINT does
  to a child of a pytest started in the background of a shell without job control (``cmd
  &`` in a script): such a shell starts it with SIGINT ignored, and its children inherit that.
"""

from __future__ import annotations

import queue
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

IGNORED_SIGINT = (
    " (a child that ignores SIGINT does this: was pytest started in the background of a"
    " shell without job control, `( pytest ... & )`? Run it in the foreground.)"
)


class Lines:
    """The lines of ``stream``, read on a daemon thread as they come."""

    def __init__(self, stream: IO[str]):
        self._lines: queue.Queue[str | None] = queue.Queue()  # None: the stream ended
        self._ended = False
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._lines.put(line)
        finally:
            self._lines.put(None)

    def next(self, timeout: float, waiting_for: str) -> str:
        """The next line; "" once the stream has ended; ``AssertionError`` naming
        ``waiting_for`` when none comes within ``timeout`` seconds."""
        if self._ended:
            return ""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout:g} s waiting for {waiting_for}") from None
        if line is None:
            self._ended = True
            return ""
        return line

    def rest(self, timeout: float, waiting_for: str, hint: str = "") -> str:
        """Every line until the stream ends (the child exits), within ``timeout`` seconds in
        all, else ``AssertionError`` naming ``waiting_for`` (and ``hint``) with what came."""
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while not self._ended:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise AssertionError(
                    f"still running after {timeout:g} s waiting for {waiting_for}{hint}; "
                    f"it printed: {''.join(got)!r}"
                ) from None
            if line is None:
                self._ended = True
            else:
                got.append(line)
        return "".join(got)
