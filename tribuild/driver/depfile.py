"""Depfiles: what make and ninja read to learn which inputs an output was made from.

Terms:
- *import closure*: a file and every file it imports, transitively, sorted
  (``queries.targets.import_closure``). Every one of them can change a target's outputs.
- *depfile*: one Makefile rule without a recipe, ``OUTPUT: INPUT INPUT ...``, one input a
  line after the first, with spaces, ``#``, ``:`` and ``$`` escaped the way GNU make and
  ninja read them (``\\ ``, ``\\#``, ``\\:``, ``$$``; an unescaped colon in a prerequisite
  makes make read a pattern rule).
"""

from __future__ import annotations

from tribuild.queries.targets import import_closure  # noqa: F401  (the depfile's inputs)


def escape(path: str) -> str:
    return (
        path.replace("\\", "/")
        .replace("$", "$$")
        .replace("#", "\\#")
        .replace(" ", "\\ ")
        .replace(":", "\\:")
    )


def render(output: str, inputs: tuple[str, ...]) -> str:
    """The depfile text for ``output`` made from ``inputs`` (in the order given)."""
    lines = [f"{escape(output)}:"] + [f" {escape(path)}" for path in inputs]
    return " \\\n".join(lines) + "\n"
