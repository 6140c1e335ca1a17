"""File events for `tribuild watch`: which ones matter, and how a burst becomes one batch.

Terms:
- *scope*: what a project's builds read: ``Tribuild.toml``, the ``.tri`` files under the
  source folders and the files of the last build's import closure (imports may lie outside
  the source folders). An event *matters* when one of its paths (a move has two) is in the
  scope; any other file (outputs, editor temporaries, a ``.tri`` file outside the sources
  that nothing imports) is ignored. Creating, deleting or moving a folder under a source
  folder matters too: it may hold ``.tri`` files.
- *watched folders*: the source folders (recursively), the root (for Tribuild.toml) and
  the folders of closure files outside them (not recursively).
- *generation*: a counter bumped by every event that matters. A build remembers the
  generation it started from; its outputs may be written only while that is still the
  current one (``Changes.current``), so nothing from a superseded revision is ever written.
- *batch*: the paths changed since the last batch. An editor's save is often several
  events (a write to a temporary file, a rename, an attribute change), a millisecond or two
  apart. The batch is handed to the builder once no event came for ``settle`` seconds (half
  the debounce), and the builder computes at once; it writes the outputs only once no event
  came for the whole ``debounce`` (``Changes.quiet``). So the queries run while the
  debounce runs out, and a further event, which would have restarted the debounce, cancels
  the build instead (its queries stop at once) and starts the next batch. The batch's *due*
  time is the end of its settle period (``time.monotonic()``); how late the builder starts
  after it is reported.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEventHandler,
)

from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from watchdog.observers.api import ObservedWatch

# The kinds of events asked of the OS. Not opening a file, closing it unwritten or a
# folder's own changes: every rebuild reads every source, and each read would be two events
# through watchdog's threads, competing with the builder for the interpreter.
EVENTS = (
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
)


@record
class Batch:
    paths: frozenset[str]
    generation: int  # the generation the batch ends at
    due: float  # when its settle period ended (time.monotonic())


@record
class Scope:
    root: str  # absolute
    config: str  # absolute path of Tribuild.toml
    sources: tuple[str, ...]  # absolute source folders (or files)
    closure: frozenset[str]  # absolute paths of the files the last build read

    def relevant(self, path: str, is_directory: bool) -> str | None:
        """The root-relative POSIX path of ``path`` if an event on it matters, else None."""
        path = os.path.abspath(path)
        rel = os.path.relpath(path, self.root).replace(os.sep, "/")
        if path == self.config or (path in self.closure and path.endswith(".tri")):
            return rel
        if not (is_directory or path.endswith(".tri")) or rel.startswith("../"):
            return None
        inside = any(path == s or path.startswith(s + os.sep) for s in self.sources)
        return rel if inside else None

    def folders(self) -> dict[str, bool]:
        """The folders to watch: absolute path -> recursive."""
        recursive = [s for s in self.sources if os.path.isdir(s)]
        flat = (
            {self.root}
            | {os.path.dirname(p) for p in self.closure}
            | {os.path.dirname(s) for s in self.sources if not os.path.isdir(s)}
        )
        top = [f for f in recursive if not any(f.startswith(o + os.sep) for o in recursive)]
        out = {f: True for f in top}
        for folder in flat:
            if os.path.isdir(folder) and not any(
                folder == r or folder.startswith(r + os.sep) for r in top
            ):
                out[folder] = False
        return out


class Changes:
    """The generation and the pending batch, shared by the event thread (``note``) and the
    builder (``take``, ``quiet``, ``current``)."""

    def __init__(self, debounce: float):
        self.debounce = debounce
        self.settle = debounce / 2
        self.generation = 0
        self._cond = threading.Condition()
        self._paths: set[str] = set()
        self._last = 0.0
        self._stopped = False

    def note(self, paths: set[str]) -> None:
        with self._cond:
            self.generation += 1
            self._paths |= paths
            self._last = time.monotonic()
            self._cond.notify_all()

    def take(self) -> Batch | None:
        """Wait for a batch quiet for ``settle`` seconds; None once ``stop`` was called."""
        with self._cond:
            while not self._stopped:
                if self._paths:
                    due = self._last + self.settle
                    left = due - time.monotonic()
                    if left <= 0:
                        paths, self._paths = frozenset(self._paths), set()
                        return Batch(paths, self.generation, due)
                    self._cond.wait(left)
                else:
                    self._cond.wait()
            return None

    def quiet(self, generation: int) -> bool:
        """Wait until no event came for ``debounce`` seconds; whether ``generation`` is then
        still the latest (False as soon as a newer event is noted, or ``stop`` called)."""
        with self._cond:
            while generation == self.generation and not self._stopped:
                left = self._last + self.debounce - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)
            return False

    @contextmanager
    def current(self, generation: int):
        """Yields whether ``generation`` is still the latest; no event is noted meanwhile."""
        with self._cond:
            yield generation == self.generation and not self._stopped

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


class Handler(FileSystemEventHandler):
    """watchdog's callback: each event that matters under the current ``scope`` is passed,
    as a set of root-relative paths, to ``on_change`` (in watchdog's thread)."""

    def __init__(self, scope: Scope, on_change):
        self.scope = scope  # replaced by the builder after each build
        self.on_change = on_change

    def on_any_event(self, event) -> None:
        scope = self.scope
        paths = {
            scope.relevant(p, event.is_directory)
            for p in (event.src_path, getattr(event, "dest_path", ""))
            if p
        }
        paths.discard(None)
        if paths:
            self.on_change(paths)


class Watches:
    """The watchdog observer and the folders it watches, kept equal to a scope's."""

    def __init__(self, handler: Handler):
        from watchdog.observers import Observer

        self.handler = handler
        self.observer = Observer()
        self.watched: dict[tuple[str, bool], ObservedWatch] = {}

    def start(self) -> None:
        self.update(self.handler.scope)
        self.observer.start()

    def update(self, scope: Scope) -> None:
        self.handler.scope = scope
        wanted = set(scope.folders().items())
        for key in set(self.watched) - wanted:
            self.observer.unschedule(self.watched.pop(key))
        for folder, recursive in sorted(wanted - set(self.watched)):
            try:
                self.watched[folder, recursive] = self.observer.schedule(
                    self.handler, folder, recursive=recursive, event_filter=list(EVENTS)
                )
            except OSError:
                continue  # gone meanwhile: its parent's events bring it back

    def stop(self) -> None:
        self.observer.stop()
        if self.observer.is_alive():
            self.observer.join()
