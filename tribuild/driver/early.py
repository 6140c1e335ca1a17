"""Writing a target's files as soon as it is built, in a build with workers.

Terms:
- *written early*: with workers (``--jobs N`` on a clean build), each process, this one and
  the workers, writes the files of the targets it built as soon as they are built
  (atomically and only if changed, like every output, and listed in the early journal
  first: ``outputs.records``); ``build.write_result`` then finds them holding their bytes,
  records them and deletes what is stale, as for any build.
"""

from __future__ import annotations

from tribuild.driver import outputs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.config.load import Target
    from tribuild.driver.pool.units import Unit
    from tribuild.driver.session import Project
    from tribuild.engine import Database


class EarlyWriter:
    """The scheduler's emit step for a build that writes: where a target was built, if it
    built without errors, its files (relative path -> bytes) are its job; the jobs of
    ``batch`` targets or more are written together (``outputs.write_changed``: atomic, only
    if changed, one round of fsyncs: syncing after every target costs a quarter more CPU;
    the last batch is written after the last unit, so it is kept small), by one process at
    a time (``outputs.writing``). A file that cannot be written is left for
    ``write_result``, which reports why."""

    batch = 4

    def __init__(
        self, project: Project, targets: tuple[Target, ...], out_dir: str, force: bool = False
    ) -> None:
        self.project, self.out_dir = project, out_dir
        self.targets = {t.name: t for t in targets}
        self.force = force
        self.owned: dict[str, str] | None = None  # what the record lists, read at the first write

    def prepare(self, db: Database, unit: Unit, value: Any) -> dict[str, bytes] | None:
        """The files of ``unit``'s target from its ``TargetBuild`` ``value``, or None when it
        failed."""
        from tribuild.driver.build import judged, target_files

        t = self.targets[unit.name]
        if value.problem is not None or judged(db, t, value).failed:
            return None
        return target_files(db, self.project, t, value, self.out_dir)

    def run(self, jobs: list[dict[str, bytes]], wait: bool) -> list[tuple[str, ...]] | None:
        """For each job, the relative paths of its files that were written; None, without
        waiting, when another process is writing and not ``wait``."""
        files = {rel: data for job in jobs for rel, data in job.items()}
        try:
            paths = outputs.inside_output(self.out_dir, sorted(files))
            with outputs.writing(self.out_dir, wait) as mine:
                if not mine:
                    return None
                if not self.force:  # a job with a file tribuild did not write: left
                    if self.owned is None:
                        self.owned = outputs.Record.load(self.out_dir).owned()
                    foreign = set(outputs.foreign(paths, files, self.owned))  # to write_result
                    paths = {
                        rel: paths[rel] for job in jobs if not foreign & set(job) for rel in job
                    }
                done = set(
                    outputs.write_changed(
                        {paths[rel]: files[rel] for rel in paths}, early=self.out_dir
                    )
                )
        except (outputs.OutsideOutput, outputs.WriteFailed, OSError):
            return [() for _ in jobs]
        written = {rel for rel, path in paths.items() if path in done}
        return [tuple(rel for rel in sorted(job) if rel in written) for job in jobs]
