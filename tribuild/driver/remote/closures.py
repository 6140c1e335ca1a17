"""Import closures for the remote cache: from the import lists the remote holds, else from
the queries (which lex and parse the file), whose lists are then offered to the remote.

A list read from the remote passes the checks of an action entry (``entries.unframe``:
digest, and signature when a secret is set) and must name project-relative paths; anything
else is refused, counted, and the file's list is computed here. A list is trusted as much as
an action entry is: whoever may write one may write the other.

What a listed closure may cost is bounded: a list naming more than ``MAX_LISTED`` files, or
naming a file that cannot be read here, is checked against the file (lexed, as without a
remote), and refused and replaced when it disagrees, whether or not a built target imports
the file. (A well-framed list naming 100,000 missing files made a fresh clone read them all:
12-35 s against 0.9 s without the remote.)
"""

from __future__ import annotations

import json
import posixpath

from tribuild.driver.remote import action
from tribuild.driver.sources import may_import
from tribuild.queries.inputs import source_text
from tribuild.queries.names import import_targets
from tribuild.queries.targets import closure_of
from tribuild.remote import Link, entries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.engine import Database

MAX_LISTED = 256  # files one import list may name unchecked; the zoo's longest names a few


class Closures:
    """The import lists of one build: ``lists`` (path -> the files it imports), ``digests``
    (path -> the digest of its text, None when it cannot be read) and ``computed`` (remote
    key -> a list computed here that the remote lacked: ``framed`` for the upload)."""

    def __init__(
        self, link: Link, prefix: str, salt: str, secret: bytes | None, read: bool
    ) -> None:
        self.link, self.prefix, self.salt = link, prefix, salt
        self.secret, self.read = secret, read
        self.lists: dict[str, tuple[str, ...]] = {}
        self.digests: dict[str, str | None] = {}
        self.computed: dict[str, tuple[str, ...]] = {}
        self.unchecked: set[str] = set()  # paths whose list came from the remote, unchecked
        self.named_by: dict[str, str] = {}  # a path -> the remote-listed file naming it

    def of(self, db: Database, entry_paths: list[str]) -> dict[str, tuple[str, ...]]:
        """The import closure of each of ``entry_paths``, sorted, as
        ``queries.targets.import_closure`` gives it (``db`` holds the sources)."""
        seen = set(entry_paths)
        frontier = sorted(seen)
        while frontier:  # one round trip per level of imports (none after ``batch``)
            self._learn(db, frontier)
            following = []
            for path in frontier:
                for target in self.lists[path]:
                    if target not in seen:
                        seen.add(target)
                        following.append(target)
            frontier = following
        return {entry: closure_of(entry, self.lists.__getitem__) for entry in entry_paths}

    def text_digest(self, db: Database, path: str) -> str | None:
        if path not in self.digests:
            text = source_text(db, path).text
            self.digests[path] = None if text is None else entries.content_digest(text.encode())
        return self.digests[path]

    def _key(self, db: Database, path: str) -> str | None:
        """Where the remote keeps the import list of ``path`` as it reads now; None when it
        cannot be read."""
        text_digest = self.text_digest(db, path)
        if text_digest is None:
            return None
        return entries.imports_key(self.prefix, action.imports_digest(self.salt, path, text_digest))

    def batch(self, db: Database, paths: list[str]) -> dict[str, tuple[str, ...]]:
        """The import list of each of ``paths`` (``driver.sources.load_sources``'s
        ``import_lists``)."""
        self._learn(db, list(dict.fromkeys(paths)))
        return {p: self.lists[p] for p in paths}

    def _learn(self, db: Database, paths: list[str]) -> None:
        """Fill ``lists`` for ``paths``: from the remote where it holds them, else here (a
        text without the words of an import imports nothing, as ``load_sources`` knows)."""
        keys = {}
        for path in paths:
            if path in self.lists:
                continue
            text = source_text(db, path).text
            if text is None and path in self.named_by:  # listed, yet missing or unreadable
                self._check(db, self.named_by[path])
            if not may_import(text):
                self.lists[path] = ()
                continue
            key = self._key(db, path)
            if key is not None:
                keys[path] = key
        wanted = [p for p in paths if p in keys] if self.read else []
        got = self.link.get_many([keys[p] for p in wanted])
        for path, data in zip(wanted, got, strict=True):
            if data is not None:
                listed = self._parse(path, keys[path], data)
                if listed is not None:
                    self.lists[path] = listed
                    self.unchecked.add(path)
                    for named in listed:
                        self.named_by.setdefault(named, path)
                    if len(listed) > MAX_LISTED:
                        self._check(db, path)
        for path in paths:
            if path not in self.lists:
                self.lists[path] = import_targets(db, path)
                if path in keys:
                    self.computed[keys[path]] = self.lists[path]

    def _check(self, db: Database, path: str) -> None:
        """Check the remote's list of ``path`` against the file, once: refused and replaced
        (for this build and on the remote) when it disagrees."""
        if path not in self.unchecked:
            return
        self.unchecked.discard(path)
        true = import_targets(db, path)
        if self.lists[path] != true:
            listed = len(self.lists[path])
            self.link.refuse(
                f"the import list of `{path}`",
                f"it names {listed} file{'s' * (listed != 1)}, not what the file imports",
            )
            self.lists[path] = true
            key = self._key(db, path)
            if key is not None:
                self.computed[key] = true

    def _parse(self, path: str, key: str, data: bytes) -> tuple[str, ...] | None:
        try:
            listed = json.loads(entries.unframe(key, data, self.secret))
            if type(listed) is not list or not all(_relative(p) for p in listed):
                raise entries.Refused("corrupt", "its body is not a list of project paths")
        except entries.Refused as refused:
            self.link.refuse(f"the import list of `{path}`", str(refused))
            return None
        except ValueError:
            self.link.refuse(f"the import list of `{path}`", "its body is not readable")
            return None
        return tuple(listed)

    def correct(self, db: Database, closure: tuple[str, ...]) -> None:
        """Refuse and replace the remote lists of ``closure``'s files that disagree with the
        queries (which read those files for a build here)."""
        for path in closure:
            true = import_targets(db, path)
            if self.lists.get(path, true) != true:
                self.link.refuse(f"the import list of `{path}`", "it does not match the file")
                self.lists[path] = true
                key = self._key(db, path)
                if key is not None:
                    self.computed[key] = true

    def framed(self) -> list[tuple[str, bytes]]:
        """The framed import lists computed here, for the remote."""
        return [
            (key, entries.frame(key, json.dumps(list(listed)).encode(), self.secret))
            for key, listed in sorted(self.computed.items())
        ]


def _relative(path: object) -> bool:
    """A path as ``queries.names.resolve_path`` gives one: relative, normalized, inside."""
    return (
        type(path) is str
        and path != ""
        and not path.startswith(("/", "../"))
        and path != ".."
        and "\\" not in path
        and ":" not in path
        and posixpath.normpath(path) == path
    )
