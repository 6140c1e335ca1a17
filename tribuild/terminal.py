"""Whether to color what tribuild prints: ``--color``, then ``NO_COLOR`` and ``FORCE_COLOR``
(https://no-color.org, https://force-color.org), then whether the stream is a terminal.

The command line sets ``choice`` once (``cli.main``); everything that prints asks ``color``.
Standard library only: the no-op path imports this module.
"""

from __future__ import annotations

import os

CHOICES = ("auto", "always", "never")
choice = "auto"
"""``--color``: "always" and "never" win over the environment; "auto" asks it."""


def color(stream) -> bool:
    """Whether to write ANSI colors to ``stream``."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def rich_options(stream) -> dict:
    """Keyword arguments for ``rich.console.Console`` that follow the same choice (the rich
    screens are shown only on a terminal, so only the colors are at stake)."""
    return {"no_color": not color(stream)}
