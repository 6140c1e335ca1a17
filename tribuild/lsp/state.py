"""The server's one long-lived database and the inputs it holds.

Terms:
- *open document*: a file the editor has open; its text is the editor's, saved or not.
  Every other file's text is read from disk (``driver.sources.read_source``), when first
  needed and again when the client reports it changed (``workspace/didChangeWatchedFiles``).
- *path*: as queries see it, relative to the project root (``models/resnet.tri``). A document
  outside the root has no path: the server answers nothing about it.
- *reported files*: the ``.tri`` files under the project's source folders, the open
  documents, and every file they import: the files whose diagnostics are published.
- Writers (``open``, ``change``, ``close``, ``disk_changed``) may run on any thread: a set
  while another thread runs queries makes those raise ``Cancelled`` (the engine's
  cancellation), which is how an edit stops a check made stale by it. Everything else runs
  on the server's one query thread.
- Nothing here writes to disk: the persistent cache is loaded at start, never saved, and no
  build output is written.
"""

from __future__ import annotations

import os
import threading
from urllib.parse import quote, unquote, urlparse

from tribuild.config.load import Target
from tribuild.config.problems import ConfigError
from tribuild.diagnostics import Diagnostic, Loc
from tribuild.driver.session import Project, salt
from tribuild.driver.sources import MAX_BYTES, may_import, read_source, scan, too_large
from tribuild.engine import Database
from tribuild.lang import InstanceKey, ast, describe_instance
from tribuild.project import DEFAULT_CACHE_DIR
from tribuild.queries.inputs import SourceText, source_text
from tribuild.queries.lower import file_lowering_report, lowering_report
from tribuild.queries.names import import_targets
from tribuild.queries.report import QuerySources
from tribuild.queries.semantic import (
    has_defaults,
    instance_diagnostics,
    layer_instance,
    signature,
)
from tribuild.queries.syntax import item_ast, item_index, read_error
from tribuild.queries.targets import (
    file_item_diagnostics,
    instance_report,
    reached_instances,
    target_report,
)


def uri_to_path(uri: str) -> str | None:
    """The absolute file system path of a ``file:`` URI (None for another scheme)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return os.path.normpath(unquote(parsed.path))


def path_to_uri(path: str) -> str:
    return "file://" + quote(os.path.abspath(path))


def discover(folder: str) -> tuple[Project, str | None]:
    """The project around ``folder``, and the configuration problem if Tribuild.toml is bad
    (then the folder is used as a project without one, so editing still works)."""
    try:
        return Project.discover(folder), None
    except ConfigError as err:
        root = os.path.abspath(folder)
        return Project(root, None, os.path.join(root, DEFAULT_CACHE_DIR)), str(err)


class Related:
    """Where each level of an instance's chain was built: a ``let`` of its parent."""

    __slots__ = ("loc", "message")

    def __init__(self, loc: Loc, message: str) -> None:
        self.loc, self.message = loc, message


class Found:
    """What one check found: diagnostics by path, with the chain locations of instance
    diagnostics, and the problems of targets that cannot be instantiated."""

    __slots__ = ("by_path", "related", "problems")

    def __init__(self) -> None:
        self.by_path: dict[str, list[Diagnostic]] = {}
        self.related: dict[Diagnostic, list[Related]] = {}
        self.problems: list[str] = []


class EditorState:
    def __init__(self, folder: str) -> None:
        self.project, self.config_problem = discover(folder)
        self.db = Database.load(
            self.project.cache_dir, salt("", self.project.cache_dir, record=False)
        )
        self.open: dict[str, str] = {}
        self.loaded: set[str] = set()
        self.scanned: tuple[str, ...] = ()
        self._lock = threading.Lock()  # ``open``, ``loaded`` and the texts set with them
        self.rescan()

    @property
    def root(self) -> str:
        return self.project.root

    # --- paths ------------------------------------------------------------------------

    def path_of(self, uri: str) -> str | None:
        full = uri_to_path(uri)
        if full is None:
            return None
        rel = os.path.relpath(full, self.root)
        if rel.startswith("..") or os.path.isabs(rel):
            return None
        return rel.replace(os.sep, "/")

    def uri_of(self, path: str) -> str:
        return path_to_uri(os.path.join(self.root, *path.split("/")))

    def text(self, path: str) -> str:
        """The text of ``path`` as the queries see it (read first if it was not)."""
        if path not in self.loaded:
            self.load([path])
        return source_text(self.db, path).text or ""

    # --- writers (any thread) ---------------------------------------------------------

    def rescan(self) -> None:
        """Find the source folders' files again (at start, and when files come or go)."""
        folders = self.project.config.sources if self.project.config else (".",)
        self.scanned = scan(self.root, folders)

    def reload_config(self) -> None:
        project, problem = discover(self.root)
        project.cache_dir = self.project.cache_dir
        self.project, self.config_problem = project, problem
        self.rescan()

    def open_document(self, path: str, text: str) -> None:
        with self._lock:  # so that ``load`` cannot set the disk's text over the editor's
            self.open[path] = text
            self.loaded.add(path)
            large = len(text) > MAX_BYTES // 4 and too_large(len(text.encode("utf-8", "replace")))
            # over the limit, the same error `tribuild check` reports for the file on disk
            self.db.set(source_text, path, SourceText(None, large) if large else SourceText(text))

    def close_document(self, path: str) -> None:
        with self._lock:
            self.open.pop(path, None)
            self.db.set(source_text, path, read_source(self.root, path))

    def disk_changed(self, paths: list[str]) -> None:
        """Files changed, created or deleted on disk: re-read those not open."""
        for path in paths:
            with self._lock:
                if path.endswith(".tri") and path not in self.open and path in self.loaded:
                    self.db.set(source_text, path, read_source(self.root, path))

    # --- the query thread ---------------------------------------------------------------

    def load(self, paths) -> set[str]:
        """Read every file of ``paths`` and of their import closure not read yet (an open
        document is read already, but what it imports may not be); the closure."""
        closure: set[str] = set()
        pending = sorted(set(paths))
        while pending:
            for path in pending:
                with self._lock:
                    if path not in self.loaded:
                        self.loaded.add(path)
                        self.db.set(source_text, path, read_source(self.root, path))
            closure.update(pending)
            pending = sorted(
                {
                    t
                    for p in pending
                    if may_import(source_text(self.db, p).text)
                    for t in import_targets(self.db, p)
                }
                - closure
            )
        return closure

    def reported(self) -> list[str]:
        """The reported files, read (the closure is followed again: an edit may import)."""
        targets = self.project.config.targets if self.project.config else ()
        with self._lock:  # the event loop opens and closes documents meanwhile
            opened = set(self.open)
        scanned = set(self.scanned)
        closure = self.load([*sorted(scanned | opened), *(t.entry_path for t in targets)])
        return sorted(
            p for p in closure if p in scanned or p in opened or read_error(self.db, p) is None
        )

    def check(self) -> Found:
        """Every diagnostic of the reported files and of the targets."""
        found = Found()
        seen: set[tuple] = set()

        def add(diag: Diagnostic, related: list[Related] | None = None) -> None:
            key = (diag.code, diag.primary.loc, diag.message)
            if key in seen:
                return
            seen.add(key)
            found.by_path.setdefault(diag.primary.loc.path, []).append(diag)
            if related:
                found.related[diag] = related

        roots: list[InstanceKey] = []
        for path in self.reported():
            for diag in file_item_diagnostics(self.db, path):
                add(diag)
            if read_error(self.db, path) is None:
                roots.extend(default_instances(self.db, path))
                for diag in file_lowering_report(self.db, path):  # what codegen refuses
                    add(diag)
        for target in self.project.config.targets if self.project.config else ():
            report = target_report(
                self.db, target.entry_path, target.entry_layer, target.args, target.input
            )
            if report.problem is not None:
                found.problems.append(f"target `{target.name}` cannot be built: {report.problem}")
                continue
            for diag in report.diagnostics:
                if not diag.notes:  # instance diagnostics come with their chains below
                    add(diag)
            assert report.root is not None  # a target without a problem has its instance
            if not any(d.severity == "error" for d in report.diagnostics):
                for diag in lowering_report(self.db, report.root):  # as `check` does
                    add(diag)
            roots.append(report.root)
        for root in dict.fromkeys(roots):
            # ``instance_report``: the cut diagnostics, then each reached instance's own, in
            # the order of ``reached_instances``; so each is matched with its chain
            reach = reached_instances(self.db, root)
            diags = instance_report(self.db, root)
            cuts = len(reach.cut)
            chains = [
                chain for key, chain in reach.instances for _ in instance_diagnostics(self.db, key)
            ]
            for diag in diags[:cuts]:
                add(diag)
            for diag, chain in zip(diags[cuts:], chains, strict=True):
                add(diag, self._chain_locations(root, chain))
        return found

    def roots(self) -> list[tuple[Target | None, InstanceKey]]:
        """The instances the project builds from: each target's (with the target), then the
        default instances of the reported files."""
        reported = self.reported()
        out: list[tuple[Target | None, InstanceKey]] = []
        for t in self.project.config.targets if self.project.config else ():
            report = target_report(self.db, t.entry_path, t.entry_layer, t.args, t.input)
            if report.root is not None:
                out.append((t, report.root))
        for path in reported:
            if read_error(self.db, path) is None:
                out.extend((None, root) for root in default_instances(self.db, path))
        return out

    def _chain_locations(self, root: InstanceKey, chain) -> list[Related]:
        """For each level of ``chain``: the member ``let`` of the parent that built it."""
        out = []
        parent = root
        for member, child in chain:
            name = member.split("[", 1)[0]
            item = item_ast(self.db, parent.path, parent.item_id).item
            let = next(
                (
                    m
                    for m in getattr(item, "members", ())
                    if isinstance(m, ast.Let) and m.name == name
                ),
                None,
            )
            if let is not None:
                out.append(
                    Related(
                        Loc(parent.path, parent.item_id, let.name_span),
                        f"{describe_instance(child)} is built here, as `{member}` of "
                        f"{describe_instance(parent)}",
                    )
                )
            parent = child
        return out

    def sources(self) -> QuerySources:
        return QuerySources(self.db)


def default_instances(db, path: str) -> list[InstanceKey]:
    """The instances of the layers of ``path`` whose parameters all have defaults (what
    ``tribuild check`` instantiates outside targets)."""
    out = []
    for entry in item_index(db, path):
        if entry.kind == "layer" and has_defaults(signature(db, path, entry.id).signature):
            root = layer_instance(db, path, entry.id, ())
            if not isinstance(root, str):
                out.append(root)
    return out
