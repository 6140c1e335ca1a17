"""Exceptions the engine raises to its callers, and the warnings it gives them.

Terms:
- *key*: a query together with its arguments, shown as ``name(args...)``.
- *cycle*: a chain of keys, each asked for by the previous one while it was being computed
  or verified, that comes back to its first key.
"""

from __future__ import annotations


class MissingInput(Exception):
    """An input query was read for a key that was never set or has been removed."""

    def __init__(self, key: str):
        super().__init__(f"input {key} is not set (never set, or removed)")
        self.key = key


class CycleError(Exception):
    """A query asked, directly or transitively, for itself. ``cycle`` lists the keys in order,
    starting and ending with the same key."""

    def __init__(self, cycle: list[str]):
        super().__init__("query cycle: " + " -> ".join(cycle))
        self.cycle = cycle


class Cancelled(Exception):
    """The running revision was cancelled because an input was set from another thread.
    Nothing computed by the cancelled work was stored; read again to get fresh results."""


def warn(message: str) -> None:
    """Tell the user about something the store recovered from (a damaged entry, an unreadable
    file): a warning on the ``tribuild.engine`` logger. ``logging`` is imported only when there
    is something to say: importing it costs ~7 ms of CPU, a tenth of a no-change build."""
    import logging

    logging.getLogger("tribuild.engine").warning("engine store: %s", message)
