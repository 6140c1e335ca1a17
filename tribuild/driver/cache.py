"""The cache folder: what is in it, its size limit, pruning, clearing and validation.

Terms:
- *generation*: the engine store of one salt (one tribuild version with its options): its
  graph file ``graph-<id>.json`` and its value packs ``values-<id>-*.pack``, a *stored graph*
  of ``engine.store.folder``, which knows those names and formats. The *current*
  generation is the one this tribuild reads and writes; the others are left by other
  versions and are only ever useful again if that version comes back.
- *last used*: the graph file's mtime: every build and compile rewrites its generation's.
- *size limit*: ``[cache] max_size_mb``. After each save the least recently used
  generations other than the current one are deleted until the folder fits (LRU). A current
  generation larger than the limit on its own is kept, and reported by ``stats``.
- *litter*: temporary files (``.graph-<id>.json.XXXXXXXX.tmp``, ...) that a killed build
  left beside the store, the manifest, ``explain.json`` or the salt record; ``evict``
  deletes them.
- *validate*: re-read every generation and re-hash every entry against its stored checksum;
  a generation with a bad graph file or a bad entry is deleted (the next build recomputes
  what it held) and reported.
Every change happens under the project lock.
"""

from __future__ import annotations

import json
import os
import re
import time

from tribuild.base.files import listdir, read_regular, remove_entry, unlink
from tribuild.base.record import record
from tribuild.driver.lock import project_lock
from tribuild.driver.outputs import remove_temps
from tribuild.driver.session import salt
from tribuild.engine import PACK_BYTES
from tribuild.engine import folder as store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from tribuild.driver.session import Project

_DRIVER_FILES = re.compile(r"build-manifest\.json|explain\.json|salt\.json")


def _written_under_lock(name: str) -> bool:
    """The files whose temporaries the lock holder may delete: the store's and the driver's."""
    return store.is_store_file(name) or _DRIVER_FILES.fullmatch(name) is not None


@record
class Generation:
    id: str
    files: tuple[str, ...]  # the graph file first, then its packs
    bytes: int
    last_used: float
    current: bool


def generations(cache_dir: str) -> list[Generation]:
    """Every generation in the folder, least recently used first."""
    names = listdir(cache_dir)
    if not names:
        return []
    current = store.store_id(salt(cache_dir=cache_dir, record=False))
    out = []
    for stored in store.stored_graphs(cache_dir, names):
        files = stored.files
        stats = [os.stat(f) for f in files if os.path.exists(f)]
        out.append(
            Generation(
                stored.id,
                files,
                sum(s.st_size for s in stats),
                os.stat(files[0]).st_mtime,
                stored.id == current,
            )
        )
    return sorted(out, key=lambda g: (g.last_used, g.id))


def remove(generation: Generation) -> None:
    for path in generation.files:
        remove_entry(path)


def evict(cache_dir: str, max_bytes: int | None) -> list[Generation]:
    """Delete least recently used generations (never the current one) until the folder's
    generations fit in ``max_bytes``; the ones deleted. Deletes the litter first."""
    remove_temps(cache_dir, _written_under_lock)
    if not max_bytes or store.store_bytes(cache_dir) <= max_bytes:
        return []
    gens = generations(cache_dir)
    total = sum(g.bytes for g in gens)
    gone = []
    for g in gens:
        if total <= max_bytes:
            break
        if not g.current:
            remove(g)
            total -= g.bytes
            gone.append(g)
    return gone


def prune(cache_dir: str, days: float, now: float | None = None) -> list[Generation]:
    """Delete generations other than the current one not used for ``days`` days."""
    limit = (now or time.time()) - days * 86400
    gone = [g for g in generations(cache_dir) if not g.current and g.last_used < limit]
    for g in gone:
        remove(g)
    return gone


def clear(cache_dir: str, root: str) -> int:
    """Delete every generation, the build manifest and the modules ``compile_model`` kept
    (``model_files``); the number of files deleted. The explanations stay: they say why each
    output was last written, which stays true."""
    from tribuild.driver.noop.manifest import NAME

    files = [f for g in generations(cache_dir) for f in g.files]
    files += [os.path.join(cache_dir, NAME)] + model_files(cache_dir, root)
    gone = [f for f in files if os.path.lexists(f)]
    for path in gone:
        unlink(path)
    return len(gone)


def model_files(cache_dir: str, root: str) -> list[str]:
    """The files ``compile_model`` keeps in the cache (``api``): each model manifest
    (``model-*.json``) and the outputs it lists (paths relative to ``root``) that lie in
    the cache's ``models`` folder, so a cache folder set to a folder of the project's own
    never loses a file it did not get from ``compile_model``."""
    folder = os.path.join(os.path.realpath(cache_dir), "models") + os.sep
    found = []
    for name in listdir(cache_dir):
        if name.startswith("model-") and name.endswith(".json"):
            path = os.path.join(cache_dir, name)
            try:
                outputs = [row[0] for row in json.loads(read_own(path))["outputs"]]
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                outputs = []
            found.append(path)
            found += [
                p
                for rel in outputs
                if type(rel) is str
                and os.path.realpath(p := os.path.join(root, rel)).startswith(folder)
            ]
    return sorted(set(found))


def validate(cache_dir: str) -> list[tuple[str, str]]:
    """(generation id, problem) for every generation found corrupt, which is deleted."""
    bad = []
    for g in generations(cache_dir):
        problem = store.problem(store.StoredGraph(g.id, g.files))
        if problem is not None:
            remove(g)
            bad.append((g.id, problem))
    return bad


def read_own(path: str) -> bytes:
    """A cache file's bytes, if it is a regular file within bounds (else ``OSError``)."""
    return read_regular(path, PACK_BYTES)


def describe(cache_dir: str, max_bytes: int | None) -> str:
    """The ``cache stats`` text."""
    gens = generations(cache_dir)
    total = sum(g.bytes for g in gens)
    limit = f" of {max_bytes / 2**20:.0f} MiB" if max_bytes else ""
    lines = [
        f"{cache_dir}: {len(gens)} generation{'s' * (len(gens) != 1)}, "
        f"{total / 2**20:.1f} MiB{limit}"
    ]
    for g in reversed(gens):
        age = (time.time() - g.last_used) / 86400
        mark = "current" if g.current else f"last used {age:.1f} days ago"
        lines.append(f"  {g.id}  {g.bytes / 2**20:8.1f} MiB  {len(g.files)} files  {mark}")
    if max_bytes and any(g.current and g.bytes > max_bytes for g in gens):
        lines.append("  the current generation alone is over the limit: raise max_size_mb")
    return "\n".join(lines)


# `tribuild cache`'s actions on a project, each under the project lock; ``note`` is told
# when another process holds it.


def project_stats(project: Project, note: Callable[[str], None]) -> str:
    """The ``cache stats`` text, with the last build's use of the remote cache if any."""
    from tribuild.driver.remote import stats

    limit = project.config.cache_max_bytes if project.config else None
    with project_lock(project.cache_dir, note):
        remote = stats.describe(project.cache_dir)
        return describe(project.cache_dir, limit) + (f"\n{remote}" if remote else "")


def project_clear(project: Project, note: Callable[[str], None]) -> int:
    """``cache clear``: how many files were deleted."""
    with project_lock(project.cache_dir, note):
        return clear(project.cache_dir, project.root)


def project_prune(project: Project, days: float, note: Callable[[str], None]) -> list[Generation]:
    """``cache prune --days``: the generations deleted."""
    with project_lock(project.cache_dir, note):
        return prune(project.cache_dir, days)


def project_validate(project: Project, note: Callable[[str], None]) -> list[tuple[str, str]]:
    """``cache validate``: (generation id, problem) of those found corrupt and deleted."""
    with project_lock(project.cache_dir, note):
        return validate(project.cache_dir)
