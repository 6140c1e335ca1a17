"""Where outputs may go: every path written stays inside the output folder.

Terms:
- *output folder*: ``out`` of Tribuild.toml (or the folder of ``-o`` in one-file mode). Every
  path written is checked to stay inside it, by its text and, symbolic links followed, by
  where its folder leads (the output folder itself may be a link: the user chose it).
- *relative path*: how a build names an output: ``/``-separated, below the output folder
  (``resolve`` refuses one that leaves it; a damaged or crafted record may hold anything).
"""

from __future__ import annotations

import os
import posixpath

from tribuild.config.load import resolves_inside
from tribuild.config.problems import ConfigError, Problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

KERNELS = "kernels"  # the folder of the kernel files, in the output folder


class OutsideOutput(ValueError):
    """A generated path that would leave the output folder (a bug upstream, never written)."""


class WriteFailed(ConfigError):
    """An output could not be written (no space, a read-only folder, a folder that leads
    outside the output folder); every output keeps its previous or its new bytes. The CLI
    reports it like a configuration problem: the build cannot go on where it was told to."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__([Problem(path, None, None, "", message)])


def resolve(out_dir: str, relpath: str) -> str:
    """The file ``relpath`` names under ``out_dir``; raises OutsideOutput if it leaves it."""
    return os.path.join(out_dir, *_normal(relpath).split("/"))


def _normal(relpath: str) -> str:
    """``relpath`` normalized; raises OutsideOutput if it leaves the folder it is relative
    to."""
    norm = posixpath.normpath(relpath)
    if (
        not relpath
        or posixpath.isabs(relpath)
        or norm == ".."
        or norm.startswith("../")
        or "\\" in relpath
        or norm == "."
    ):
        raise OutsideOutput(f"refusing to write `{relpath}` outside the output folder")
    return norm


def inside_output(out_dir: str, relpaths: Iterable[str]) -> dict[str, str]:
    """``resolve`` each of ``relpaths``: relpath -> path; refuse (WriteFailed) a path whose
    folder leads outside ``out_dir`` through a symbolic link (each folder checked once), and
    an output folder that is not a folder."""
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise WriteFailed(
            out_dir,
            "the output folder is a file (or a link to nothing): move "
            "it away, or set `out` in Tribuild.toml to a folder",
        )
    paths = {rel: resolve(out_dir, rel) for rel in relpaths}
    inside = {}
    for rel, path in paths.items():
        folder = os.path.dirname(path)
        if folder not in inside:
            inside[folder] = resolves_inside(out_dir, folder)
        if not inside[folder]:
            raise WriteFailed(
                path,
                f"refusing to write `{rel}`: its folder leads outside the "
                f"output folder through a symbolic link",
            )
    return paths


def is_relative(relpath: str) -> bool:
    """Whether ``relpath`` names a file inside an output folder (a damaged or crafted record
    may hold anything)."""
    try:
        _normal(relpath)
        return True
    except OutsideOutput:
        return False
