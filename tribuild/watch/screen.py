"""What `tribuild watch` shows: one report per rebuild, as a status line, plain text or JSON.

Terms:
- *rebuild*: one build whose outputs were written: the files whose events started it, the
  queries that re-ran (by name, with counts) and the keys *reused* (found valid or already
  computed without running), the outputs written and removed, the time from its start to
  the outputs being on disk, its *phases*, and the failures (diagnostics, or the traceback
  of a bug in tribuild) of the targets that failed.
- *phases*: where a rebuild's time went, in seconds: ``late`` (from the end of the
  batch's settle period to the start), the driver's stages (``read sources``, ``build
  units``: the queries, ``collect outputs``), ``debounce`` (waiting for the rest of the
  debounce once computed) and ``write outputs`` (durable on disk, stale ones deleted).
- *screen*: where the reports go. ``Plain``: lines on stderr (not a terminal, or ``CI``);
  ``Live``: rich on a terminal, status lines scrolling above a region that shows the
  current errors and is cleared when they are fixed; ``Json``: one JSON object per line on
  stdout (``event``: ``watching``, ``rebuild``, ``problem``, ``cancelled``, ``command``,
  ``waiting``, ``stopped``), for editors and tools.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tribuild import terminal
from tribuild.base.record import record
from tribuild.project import SCHEMA_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.diagnostics_render import Source


@record
class Rebuild:
    changed: tuple[str, ...]
    executed: dict[str, int]
    reused: int
    written: tuple[str, ...]
    removed: tuple[str, ...]
    seconds: float
    phases: dict[str, float]
    failed: tuple[str, ...]
    diagnostics: tuple
    errors: tuple[tuple[str, str], ...]  # (target, traceback) of bugs in tribuild
    sources: Source  # renders the diagnostics' excerpts

    def status(self) -> str:
        n = len(self.changed)
        what = "build" if not n else f"{n} file{'s' * (n != 1)} changed"
        line = (
            f"{time.strftime('%H:%M:%S')} {what}: {sum(self.executed.values())} queries "
            f"re-run, {self.reused} reused, {len(self.written)} outputs written"
        )
        if self.removed:
            line += f", {len(self.removed)} removed"
        line += f", {self.seconds * 1e3:.0f} ms"
        if self.failed:
            line += f"; failed: {', '.join(self.failed)}"
        return line

    def texts(self, color: bool) -> list[str]:
        """The failures, rendered with their source excerpts."""
        from tribuild.diagnostics_render import render_text

        out = [
            f"error: internal error while building `{name}` (a bug in tribuild):\n{tb}"
            for name, tb in self.errors
        ]
        return out + [render_text(d, self.sources, color=color) for d in self.diagnostics]


class Plain:
    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.failing = False

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def watching(self, root: str, targets: tuple[str, ...]) -> None:
        self.say(f"watching {root} ({', '.join(targets)}); Ctrl-C stops")

    def rebuilt(self, rebuild: Rebuild) -> None:
        self.say(rebuild.status())
        texts = rebuild.texts(color=False)
        for text in texts:
            self.say(text.rstrip("\n"))
        if self.failing and not texts and not rebuild.failed:
            self.say("errors fixed")
        self.failing = bool(texts) or bool(rebuild.failed)

    def problem(self, message: str, failing: bool = True) -> None:
        """``failing``: the targets cannot be built until it is fixed (a deleted entry file),
        so the next good rebuild says "errors fixed"; else the build went on without it (a
        broken Tribuild.toml, its previous version kept)."""
        self.say(message)
        self.failing = self.failing or failing

    def config_fixed(self, path: str) -> None:
        """A Tribuild.toml reported broken reads well again, and is in use."""
        self.say(f"{path} fixed: using it")

    def cancelled(self, changed: tuple[str, ...]) -> None: ...

    def command(self, command: str, code: int) -> None:
        if code:
            self.say(f"--on-success `{command}` failed (exit {code})")

    def waiting(self, message: str) -> None:
        self.say(message)

    def stopped(self) -> None:
        self.say("stopped; cache saved")


class Live(Plain):
    """rich: status lines scroll; the current errors stay below them until fixed."""

    def __init__(self, console=None):
        from rich.console import Console
        from rich.live import Live as RichLive
        from rich.text import Text

        super().__init__()
        self.console = console or Console(stderr=True, **terminal.rich_options(sys.stderr))
        self.live = RichLive(Text(""), console=self.console, auto_refresh=False)
        self.live.start()
        self.shown: list[str] = []  # the errors in the live region

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def rebuilt(self, rebuild: Rebuild) -> None:
        from rich.console import Group
        from rich.text import Text

        style = "red" if rebuild.failed else "green"
        self.console.print(Text(rebuild.status(), style=style))
        self.shown = rebuild.texts(color=True)
        self.live.update(Group(*map(Text.from_ansi, self.shown)), refresh=True)

    def stopped(self) -> None:
        self.live.stop()
        super().stopped()


class Json:
    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def emit(self, event: str, **fields) -> None:
        line = {"version": SCHEMA_VERSION, "event": event, **fields}
        self.stream.write(json.dumps(line) + "\n")
        self.stream.flush()

    def watching(self, root: str, targets: tuple[str, ...]) -> None:
        self.emit("watching", root=root, targets=list(targets))

    def rebuilt(self, rebuild: Rebuild) -> None:
        from tribuild.diagnostics_render import to_json

        self.emit(
            "rebuild",
            changed=list(rebuild.changed),
            executed=rebuild.executed,
            reused=rebuild.reused,
            written=list(rebuild.written),
            removed=list(rebuild.removed),
            ms=round(rebuild.seconds * 1e3, 3),
            phases={k: round(v * 1e3, 3) for k, v in rebuild.phases.items()},
            ok=not rebuild.failed,
            failed=list(rebuild.failed),
            diagnostics=[to_json(d, rebuild.sources) for d in rebuild.diagnostics],
            errors=[{"target": n, "traceback": tb} for n, tb in rebuild.errors],
        )

    def problem(self, message: str, failing: bool = True) -> None:
        self.emit("problem", message=message)

    def config_fixed(self, path: str) -> None:
        self.emit("config_fixed", path=path)

    def cancelled(self, changed: tuple[str, ...]) -> None:
        self.emit("cancelled", changed=list(changed))

    def command(self, command: str, code: int) -> None:
        self.emit("command", command=command, code=code)

    def waiting(self, message: str) -> None:
        self.emit("waiting", message=message)

    def stopped(self) -> None:
        self.emit("stopped")


def choose(as_json: bool):
    """The screen for this process: JSON, rich on a terminal, else plain lines."""
    if as_json:
        return Json()
    if sys.stderr.isatty() and not os.environ.get("CI"):
        return Live()
    return Plain()
