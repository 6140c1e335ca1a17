"""`tribuild clean`: delete the outputs the project's builds wrote, under the project lock.

The manifest is forgotten first (the next build is never a no-op over missing outputs), then
every file the output record lists is removed if it still holds the bytes tribuild wrote;
one that does not is *kept* (``outputs.why_kept`` says why). The cache folder's temporary
files go too; its stores stay (``tribuild cache clear`` deletes those).
"""

from __future__ import annotations

from tribuild.driver.build import select
from tribuild.driver.cache import evict
from tribuild.driver.lock import project_lock
from tribuild.driver.noop import manifest
from tribuild.driver.outputs import clean, why_kept

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from tribuild.driver.session import Project


def clean_project(
    project: Project, note: Callable[[str], None]
) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """(the files removed, (file, why it was kept) for those kept); ``note`` is told when
    another process holds the lock."""
    select(project, ())
    with project_lock(project.cache_dir, note):
        manifest.forget(project.cache_dir)
        removed, kept = clean(project.out_dir)
        evict(project.cache_dir, None)  # the cache's temporary files only
    return removed, [(rel, why_kept(project.out_dir, rel)) for rel in kept]
