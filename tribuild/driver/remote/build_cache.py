"""What a build takes from the remote cache before it builds, and gives it after.

Terms:
- *hit*: a target whose action entry and every blob it names passed their checks
  (``entries``): its files (relative path -> bytes, the depfile excepted) and the
  diagnostics a local build would have reported (warnings; a target with errors is never
  stored). The build writes a hit's files through ``outputs`` like its own, and never
  tells its engine store about them: the store holds only what this checkout computed, so
  a later edit rebuilds what the edit invalidated, from the sources.
- *miss*: no entry, or one refused (counted, and overwritten by this build's upload when
  it writes).
- *upload*: after the outputs are written, the blobs of every target built here without
  errors, then its action entry (a reader never finds an entry whose blobs were not sent
  before it; a server that evicted some since makes the entry a miss), and the import lists
  the remote lacked (``closures``).
- *closures*: the import closure of each target's entry, which its action key digests,
  found from the remote's import lists where it holds them: a build whose targets are all
  hits lexes no file.
"""

from __future__ import annotations

import json
import re

from tribuild.config.load import Target
from tribuild.driver.remote import action
from tribuild.driver.remote.closures import Closures
from tribuild.engine import codec
from tribuild.queries.targets import import_closure
from tribuild.remote import Link, RemoteSettings, entries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from tribuild.diagnostics import Diagnostic
    from tribuild.engine import Database

_KERNEL = re.compile(r"kernels/[A-Za-z0-9_][A-Za-z0-9_-]*\.py")


class Hit:
    __slots__ = ("files", "diagnostics")

    def __init__(self, files: dict[str, bytes], diagnostics: tuple[Diagnostic, ...]) -> None:
        self.files, self.diagnostics = files, diagnostics


class RemoteBuild:
    """The remote cache's part in one build (``tribuild.driver.build``)."""

    def __init__(self, settings: RemoteSettings, salt: str, secret: bytes | None) -> None:
        self.settings, self.salt, self.secret = settings, salt, secret
        self.link = Link(settings)
        self.keys: dict[str, str] = {}  # target -> its action digest
        self.hits: dict[str, Hit] = {}
        self.imports = Closures(self.link, settings.prefix, salt, secret, settings.read)
        self.closures: dict[str, tuple[str, ...]] = {}  # entry path -> its import closure
        self.targets: dict[str, Target] = {}
        self.opt_level = ""
        self._known_blobs: set[str] = set()  # digests read back and checked this build

    def lookup(self, db: Database, targets: Sequence[Target], opt_level: str) -> dict[str, Hit]:
        """The targets of ``targets`` the remote holds (sources loaded in ``db``)."""
        self.closures = self.imports.of(db, sorted({t.entry_path for t in targets}))
        self.targets, self.opt_level = {t.name: t for t in targets}, opt_level
        for t in targets:
            key = self._action_digest(db, t, self.closures[t.entry_path])
            if key is not None:
                self.keys[t.name] = key
        if not self.settings.read:
            return {}
        names = [t.name for t in targets if t.name in self.keys]
        prefix = self.settings.prefix
        raw = self.link.get_many([entries.action_key(prefix, self.keys[n]) for n in names])
        wanted: dict[str, list[tuple[str, str]]] = {}
        found_diagnostics: dict[str, tuple[Diagnostic, ...]] = {}
        for name, data in zip(names, raw, strict=True):
            if data is None:
                continue
            parsed = self._parse(name, data)
            if parsed is not None:
                wanted[name], found_diagnostics[name] = parsed
        digests = sorted({d for listed in wanted.values() for _, d in listed})
        blobs = dict(
            zip(
                digests,
                self.link.get_many([entries.blob_key(prefix, d) for d in digests]),
                strict=True,
            )
        )
        for name, listed in wanted.items():
            files = {}
            for rel, digest in listed:
                data = blobs.get(digest)
                if data is None:
                    break  # evicted, or never sent: a miss
                try:
                    files[rel] = entries.check_blob(digest, data)
                except entries.Refused as refused:
                    self.link.refuse(f"`{rel}` of target `{name}`", str(refused))
                    break
                self._known_blobs.add(digest)
            else:
                self.hits[name] = Hit(files, found_diagnostics[name])
        self.link.stats.hits = len(self.hits)
        self.link.stats.misses = len(targets) - len(self.hits)
        return self.hits

    def _action_digest(self, db: Database, t: Target, closure: tuple[str, ...]) -> str | None:
        """``t``'s action key with ``closure``; None when a file of it cannot be read (the
        build reports that)."""
        files = []
        for path in closure:
            text_digest = self.imports.text_digest(db, path)
            if text_digest is None:
                return None
            files.append((path, text_digest))
        return action.action_digest(self.salt, t, self.opt_level, files)

    def _checked_key(self, db: Database, name: str) -> str | None:
        """The action key of target ``name``, built here, from the closure its build read
        through the queries. A remote import list that disagrees with them gave a key that
        misses files: it is refused and replaced, and the entry goes under the right key."""
        t = self.targets[name]
        closure = import_closure(db, t.entry_path)
        if closure == self.closures.get(t.entry_path):
            return self.keys.get(name)
        self.imports.correct(db, closure)
        return self._action_digest(db, t, closure)

    def _parse(
        self, name: str, data: bytes
    ) -> tuple[list[tuple[str, str]], tuple[Diagnostic, ...]] | None:
        """The files (relative path, digest) and diagnostics of target ``name``'s entry;
        None, counted as refused, when the entry fails a check."""
        key = entries.action_key(self.settings.prefix, self.keys[name])
        try:
            body = json.loads(entries.unframe(key, data, self.secret))
            listed = [(str(rel), str(digest)) for rel, digest in body["files"]]
            rels = [rel for rel, _ in listed]
            if (
                body["version"] != action.VERSION
                or f"{name}.py" not in rels
                or len(set(rels)) != len(rels)
                or not all(rel == f"{name}.py" or _KERNEL.fullmatch(rel) for rel in rels)
                or not all(re.fullmatch(r"[0-9a-f]{64}", digest) for _, digest in listed)
            ):
                raise entries.Refused("corrupt", "its body does not describe this target")
            diagnostics = codec.decoder()(body["diagnostics"])
            if type(diagnostics) is not tuple:
                raise entries.Refused("corrupt", "its diagnostics are not a list")
        except entries.Refused as refused:
            self.link.refuse(f"the entry of target `{name}`", str(refused))
            return None
        except (ValueError, KeyError, TypeError, codec.CodecError):
            self.link.refuse(f"the entry of target `{name}`", "its body is not readable")
            return None
        return listed, diagnostics

    def upload(
        self, db: Database, built: dict[str, tuple[dict[str, bytes], tuple[Diagnostic, ...]]]
    ) -> None:
        """Send ``built`` (target -> its files without the depfile, its diagnostics): each
        target built here without errors, with an action key; and the import lists this
        build computed that the remote lacked."""
        if not self.settings.write or self.link.down:
            return
        prefix = self.settings.prefix
        blobs: dict[str, bytes] = {}
        actions = []
        for name, (files, diagnostics) in sorted(built.items()):
            key = self._checked_key(db, name)
            if key is None:
                continue
            listed = []
            for rel in sorted(files):
                digest = entries.content_digest(files[rel])
                listed.append([rel, digest])
                if digest not in self._known_blobs:
                    blobs[digest] = files[rel]
            body = {
                "version": action.VERSION,
                "files": listed,
                "diagnostics": codec.encode(tuple(diagnostics)).decode(),
            }
            text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
            actions.append((entries.action_key(prefix, key), text))
        items = [(entries.blob_key(prefix, d), data) for d, data in sorted(blobs.items())]
        items += [(k, entries.frame(k, text, self.secret)) for k, text in actions]
        items += self.imports.framed()
        if items and self.link.set_many(items):
            self.link.stats.entries_written += len(actions)


def for_build(configured: RemoteSettings | None, cache_dir: str) -> RemoteBuild | None:
    """The remote part of a build that writes outputs, or None when no remote is
    configured (or it may neither be read nor written)."""
    from tribuild.driver.session import package_digest
    from tribuild.remote import secret, settings

    chosen = settings(configured)
    if chosen is None or not (chosen.read or chosen.write):
        return None
    return RemoteBuild(chosen, package_digest(cache_dir), secret())


def finish(remote: RemoteBuild, cache_dir: str) -> None:
    """Close the link and record its stats for ``tribuild cache stats``."""
    from tribuild.driver.remote import stats

    remote.link.close()
    stats.save(
        cache_dir, remote.link.where, remote.link.stats.as_dict(), remote.link.warning_line()
    )
