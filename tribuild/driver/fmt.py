"""`tribuild fmt`: lay out .tri files (``lang.syntax.layout``), in place or as a check.

Terms:
- *files*: the .tri files under the paths given (files or folders, relative to the current
  directory), or under the project's source folders.
- *skipped*: a file that cannot be read (missing, not UTF-8...) or whose text the lexer
  finds errors in: it is left alone and reported, with why.
- Each file is rewritten atomically (a temporary file renamed over it), and only if its
  layout changes.
"""

from __future__ import annotations

import os

from tribuild.base.record import record
from tribuild.driver.outputs import write_if_changed
from tribuild.driver.session import Project
from tribuild.driver.sources import read_source, scan
from tribuild.lang import format_text


@record
class Formatted:
    changed: tuple[str, ...]  # project-relative paths whose layout changed (or would)
    skipped: tuple[tuple[str, str], ...]  # (path, why)
    files: int


def format_files(project: Project, paths: tuple[str, ...], check: bool) -> Formatted:
    """Format the files of ``paths`` (default: the project's sources); with ``check``,
    only say which would change."""
    if paths:
        folders = tuple(os.path.relpath(os.path.abspath(p), project.root) for p in paths)
    else:
        folders = project.config.sources if project.config else (".",)
    files = scan(project.root, folders)
    changed, skipped = [], []
    for path in files:
        source = read_source(project.root, path)
        if source.text is None:
            skipped.append((path, source.error or "cannot be read"))
            continue
        laid = format_text(source.text)
        if laid is None:
            skipped.append((path, "the lexer finds errors in it (see `tribuild check`)"))
            continue
        if laid != source.text:
            changed.append(path)
            if not check:
                write_if_changed(os.path.join(project.root, *path.split("/")), laid.encode())
    return Formatted(tuple(changed), tuple(skipped), len(files))
