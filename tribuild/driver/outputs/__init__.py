"""Writing a build's outputs: atomically, only when their bytes change, only inside the output
folder, and deleting what became stale.

The concerns, one module each: ``paths`` (containment in the output folder), ``writing``
(write if changed, fsync), ``records`` (the output record and the early journal), ``stale``
(stale files, leftover temporary files, ``clean``). This ``__init__`` holds a build's
``write_outputs``, which puts them together, and is what the rest of the driver may use.
"""

from __future__ import annotations

import os

from tribuild.base.files import unlink
from tribuild.base.hashing import digest
from tribuild.base.record import record
from tribuild.config.load import resolves_inside
from tribuild.driver.outputs.paths import (
    KERNELS,
    OutsideOutput,
    WriteFailed,
    inside_output,
    is_relative,
    resolve,
)
from tribuild.driver.outputs.records import EARLY, RECORD, STALE, Record, drop_records
from tribuild.driver.outputs.stale import (
    adopted,
    clean,
    delete_aside,
    foreign,
    remove_all_temps,
    remove_stale,
    remove_temps,
    why_kept,
)
from tribuild.driver.outputs.writing import (
    fsync_all,
    holds,
    write_changed,
    write_if_changed,
    writing,
)


@record
class WriteReport:
    written: tuple[str, ...]  # relative paths whose bytes changed
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]  # stale files deleted
    kept: tuple[str, ...]  # stale files not deleted: their bytes are not tribuild's


def write_outputs(
    out_dir: str,
    files: dict[str, bytes],
    record: Record,
    produced: dict[str, tuple[str, ...]],
    targets: set[str],
    done: frozenset[str] = frozenset(),
    force: bool = False,
) -> WriteReport:
    """Delete what is stale: what the targets of ``produced`` (target -> its relpaths)
    produced before but not now, and what targets no longer in ``targets`` (those of the
    configuration) produced. Then write ``files`` (relpath -> bytes) and record them under
    their targets, the record in the same batch, renamed last. Stale files go first, while
    the record on disk still lists them: a build killed between the record's rename and
    the last deletion left files that no record named, there for good. They are moved aside
    (renamed, ``stale.remove_stale``) and deleted only once the new outputs are visible: an
    unlink costs milliseconds, a rename microseconds, and a watch's latency is the time
    until its new module is on disk. A target that failed
    keeps its previous outputs and record. The files of ``done`` were written in this build
    already (as their targets were built, under the same lock): they count as written and
    are not read back. A file at an output path that tribuild did not write (``foreign``)
    is refused (``WriteFailed``, nothing written), unless ``force``. When the record is
    lost, the files with a generated file's header count as recorded (``adopted``)."""
    paths = inside_output(out_dir, sorted(files))
    if record.lost:
        record.early = adopted(out_dir) | record.early
    if not force:
        refused = foreign({r: p for r, p in paths.items() if r not in done}, files, record.owned())
        if refused:
            more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
            raise WriteFailed(
                paths[refused[0]],
                f"refusing to overwrite `{refused[0]}`{more}: tribuild did not write it (it is "
                "not in the output record and is no generated file); move it away, rename the "
                "target, or build with --force",
            )
    drop_records(out_dir)
    mine = set(paths.values()) | {
        resolve(out_dir, rel) for rel in (*record.owned(), RECORD) if rel not in paths
    }
    names = {os.path.basename(p) for p in mine} | {STALE}
    for folder in sorted({os.path.dirname(p) for p in mine}):
        if resolves_inside(out_dir, folder):
            remove_temps(folder, names.__contains__)
    before = record.owned()
    early, record.early = record.early, {}  # recorded again only if produced now
    for name in [t for t in record.targets if t not in targets]:
        del record.targets[name]
    for target, rels in produced.items():  # this build journaled what it wrote early
        record.targets[target] = {
            rel: early[rel] if rel in done and rel in early else digest(files[rel])
            for rel in sorted(rels)
        }
    aside: list[str] = []  # stale files moved aside: deleted once the new ones are visible
    removed, kept = remove_stale(out_dir, before, record.owned(), aside)
    batch = {paths[rel]: files[rel] for rel in paths if rel not in done}
    batch[os.path.join(out_dir, RECORD)] = record.encode()
    try:
        written = set(write_changed(batch))
        unlink(os.path.join(out_dir, EARLY))  # the record now says what is tribuild's
    finally:
        delete_aside(aside)  # a build killed first leaves them to the next one's sweep
    changed = {rel for rel, full in paths.items() if rel in done or full in written}
    return WriteReport(
        tuple(r for r in paths if r in changed),
        tuple(r for r in paths if r not in changed),
        removed,
        kept,
    )


__all__ = [
    "EARLY",
    "KERNELS",
    "RECORD",
    "OutsideOutput",
    "Record",
    "WriteFailed",
    "WriteReport",
    "adopted",
    "clean",
    "drop_records",
    "foreign",
    "fsync_all",
    "holds",
    "inside_output",
    "is_relative",
    "remove_all_temps",
    "remove_stale",
    "remove_temps",
    "resolve",
    "why_kept",
    "write_changed",
    "write_if_changed",
    "write_outputs",
    "writing",
]
