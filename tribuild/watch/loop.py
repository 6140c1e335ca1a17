"""`tribuild watch`: build, then rebuild on every change, with one database kept in memory.

Terms:
- *builder*: the thread that builds. It takes a batch of changed paths (``watch_events``),
  re-reads the sources from disk into the database (``driver.compute``: only queries whose
  inputs changed re-run), waits for the rest of the debounce, and writes the outputs with
  ``driver.write_result``, exactly as `tribuild build` does, but only if no newer event
  arrived meanwhile (the *generation* check); otherwise it drops the result and takes the
  next batch.
- *event thread*: watchdog's. For each event that matters it bumps the generation, then
  sets the changed ``.tri`` files' texts in the database: a set from another thread makes
  the builder's running queries raise ``Cancelled`` (they store nothing), so stale work
  stops at once and starts over from the new state.
- *config reload*: an event on Tribuild.toml reloads the project; a bad file is reported
  and the previous configuration kept until it is fixed. The cache folder and the lock stay
  those of the start.
- The project lock is held from start to stop; stopping (Ctrl-C, ``stop()``) lets the
  running build finish, then saves the database into the persistent cache.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import traceback
from collections import Counter

from tribuild.base.record import record
from tribuild.config.problems import ConfigError
from tribuild.driver import build as driver
from tribuild.driver import cache, timing
from tribuild.driver.lock import project_lock
from tribuild.driver.noop import manifest
from tribuild.driver.progress import Quiet
from tribuild.driver.session import Project, open_database, save_database
from tribuild.driver.sources import read_source
from tribuild.engine import Cancelled, Database
from tribuild.queries.inputs import source_text
from tribuild.watch.events import Batch, Changes, Handler, Scope, Watches
from tribuild.watch.screen import Rebuild


@record
class Options:
    targets: tuple[str, ...] = ()
    opt_level: str | None = None
    debounce: float = 0.05
    on_success: str | None = None


class Watcher:
    def __init__(self, project: Project, options: Options, screen):
        driver.select(project, options.targets)  # ConfigError before anything starts
        self.project = project
        self.options = options
        self.screen = screen
        self.changes = Changes(options.debounce)
        self.config_broken = False  # the last Tribuild.toml read was refused (``_reload``)
        self.db: Database = None  # type: ignore[assignment]  # opened by run()
        self.changed: set[str] = set()  # since the last rebuild reported

    def run(self) -> None:
        """Watch until ``stop()`` or Ctrl-C; the database is saved on the way out."""
        project = self.project
        with project_lock(project.cache_dir, self.screen.waiting):
            manifest.forget(project.cache_dir)
            self.db = open_database(project)
            watches = Watches(Handler(self._scope(frozenset()), self._on_change))
            builder = threading.Thread(target=self._loop, args=(watches,), name="builder")
            try:  # a Ctrl-C may land while the threads start: everything is inside
                watches.start()
                builder.start()
                builder.join()
            except KeyboardInterrupt:
                self.stop()
                if builder.is_alive():
                    builder.join()
            finally:
                watches.stop()
                save_database(self.db, project)
                cache.evict(project.cache_dir, project.configured.cache_max_bytes)
        self.screen.stopped()

    def stop(self) -> None:
        self.changes.stop()

    def _on_change(self, paths: set[str]) -> None:
        """In the event thread: a new generation, then cancel the running build."""
        self.changes.note(paths)
        root = self.project.root
        for path in sorted(p for p in paths if p.endswith(".tri")):
            self.db.set(source_text, path, read_source(root, path))

    def _loop(self, watches: Watches) -> None:
        self.screen.watching(self.project.root, self._targets_names())
        batch: Batch | None = Batch(frozenset(), self.changes.generation, time.monotonic())
        while batch is not None:
            try:
                scope = self._rebuild(batch)
            except Exception:  # a bug: report it, keep watching
                self.screen.problem(
                    "error: internal error in tribuild watch:\n" + traceback.format_exc()
                )
                scope = None
            if scope is not None:
                watches.update(scope)
            batch = self.changes.take()

    def _targets_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in driver.select(self.project, self.options.targets))

    def _rebuild(self, batch: Batch) -> Scope | None:
        """One attempt at building the state of ``batch.generation``; the new scope if it
        was current to the end, else None."""
        start = time.monotonic()
        self.changed |= batch.paths
        config = os.path.relpath(self.project.configured.path, self.project.root)
        if config in batch.paths:
            self._reload()
        project = self.project
        targets = driver.select(project, self.options.targets)
        request = driver.Request(targets=self.options.targets, opt_level=self.options.opt_level)
        clock = timing.Clock(False)
        with self.db.log() as log:
            try:
                result, _, _ = driver.compute(self.db, project, targets, request, Quiet(), clock)
            except Cancelled:
                result = None
        with clock.stage("debounce"):
            quiet = result is not None and self.changes.quiet(batch.generation)
        with self.changes.current(batch.generation) as current:
            if not (quiet and current):
                self.screen.cancelled(tuple(sorted(self.changed)))
                return None
            assert result is not None  # ``quiet`` needs one
            with clock.stage("write outputs"):
                driver.write_result(project, result)
            phases = {"late": max(start - batch.due, 0.0), **clock.driver}
            if (problems := result.problems()) is not None:  # targets that cannot be made
                self.screen.problem(str(problems))
            self.screen.rebuilt(self._report(result, log, time.monotonic() - start, phases))
            self.changed = set()
        if self.options.on_success and not result.failed:
            self._run_command(self.options.on_success)
        return self._scope(frozenset(result.inputs))

    def _reload(self) -> None:
        try:
            project = Project.discover(self.project.root)
            driver.select(project, self.options.targets)
        except ConfigError as err:
            self.screen.problem(
                f"{err.excerpted()}\n(keeping the previous configuration until it is fixed)",
                failing=False,
            )
            self.config_broken = True
            return
        project.cache_dir = self.project.cache_dir
        self.project = project
        if self.config_broken:  # as fixed `.tri` errors are said to be
            self.config_broken = False
            self.screen.config_fixed(os.path.relpath(project.configured.path, project.root))

    def _report(self, result, log, seconds: float, phases: dict[str, float]) -> Rebuild:
        ran = set(log.executed)
        reused = (set(log.validated) | set(log.hits)) - ran
        failed = [t for t in result.targets if t.failed]
        return Rebuild(
            tuple(sorted(self.changed)),
            dict(sorted(Counter(name for name, _ in log.executed).items())),
            len(reused),
            result.report.written,
            result.report.removed,
            seconds,
            phases,
            tuple(t.name for t in failed),
            tuple(dict.fromkeys(d for t in failed for d in t.diagnostics)),  # each once
            tuple((t.name, t.error) for t in failed if t.error),
            result.sources,
        )

    def _scope(self, closure: frozenset[str]) -> Scope:
        project = self.project
        root = project.root
        return Scope(
            root,
            os.path.abspath(project.configured.path),
            tuple(os.path.abspath(os.path.join(root, s)) for s in project.configured.sources),
            frozenset(os.path.abspath(os.path.join(root, p)) for p in closure),
        )

    def _run_command(self, command: str) -> None:
        code = subprocess.run(command, shell=True, cwd=self.project.root).returncode
        self.screen.command(command, code)
