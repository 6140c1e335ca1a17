"""Depfiles: what make and ninja read to learn which inputs an output was made from.

Terms:
- *import closure*: a file and every file it imports, transitively, sorted
  (``queries.targets.import_closure``). Every one of them can change a target's outputs.
- *depfile*: one Makefile rule without a recipe, ``OUTPUT: INPUT INPUT ...``, one input a
  line after the first, each path escaped so that GNU make and ninja both read it back
  (``base.depnames``). A path neither can is refused, never written: ``driver.sources``
  refuses a source so named at the import that names it, Tribuild.toml's reader an output
  folder, and ``render`` the rest (an ``-o``, a path through the current folder).
"""

from __future__ import annotations

from tribuild.base.depnames import Unwritable, escape, unwritable
from tribuild.queries.targets import import_closure  # the depfile's inputs

__all__ = ["Unwritable", "escape", "import_closure", "render", "unwritable"]  # re-exported too


def render(output: str, inputs: tuple[str, ...]) -> str:
    """The depfile text for ``output`` made from ``inputs`` (in the order given); raises
    Unwritable when a path cannot be named faithfully."""
    lines = [f"{escape(output)}:"] + [f" {escape(path)}" for path in inputs]
    return " \\\n".join(lines) + "\n"
