"""Progress of a build, on stderr.

Terms:
- *interactive*: stderr is a terminal and the ``CI`` environment variable is not set. Then a
  rich progress bar shows the units done and the unit being built (rich is imported only
  here, only then). Otherwise progress is *plain*: one line per unit finished,
  ``[3/13] resnet18``, and nothing else (CI logs stay short and greppable).
- *quiet*: no progress at all (``-q``); messages that matter (a wait for the lock, the
  summary) are still printed by the caller.
"""

from __future__ import annotations

import os
import sys

from tribuild import terminal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO


class Quiet:
    def start(self, total: int) -> None: ...
    def started(self, name: str) -> None: ...
    def finished(self, name: str, ok: bool) -> None: ...
    def stop(self) -> None: ...


class Plain(Quiet):
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = self.done = 0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0

    def finished(self, name: str, ok: bool) -> None:
        self.done += 1
        status = "" if ok else "  FAILED"
        print(f"[{self.done}/{self.total}] {name}{status}", file=self.stream, flush=True)


class Bar(Quiet):
    """rich's bar; ``describe`` shows the units being built."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

        self.bar = Progress(
            TextColumn("building"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True, **terminal.rich_options(sys.stderr)),
            transient=True,
        )
        self.running: list[str] = []
        self.task: TaskID = TaskID(0)  # set by start

    def start(self, total: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("", total=total)

    def started(self, name: str) -> None:
        if name not in self.running:  # a unit a worker died with is handed out again
            self.running.append(name)
        self.bar.update(self.task, description=", ".join(self.running))

    def finished(self, name: str, ok: bool) -> None:
        if name in self.running:
            self.running.remove(name)
        self.bar.update(self.task, advance=1, description=", ".join(self.running))

    def stop(self) -> None:
        self.bar.stop()


def choose(quiet: bool = False) -> Quiet:
    """The progress display for this process's stderr."""
    if quiet:
        return Quiet()
    if sys.stderr.isatty() and not os.environ.get("CI"):
        return Bar()
    return Plain()
