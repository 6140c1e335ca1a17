"""Checking tomllib's plain dicts against a schema, collecting every problem on the way.

Terms:
- *where*: the key path (see ``config_locate``) of the value being checked.
- *check*: a function ``(where, value) -> value | None`` that returns the value (possibly
  normalised) when it is acceptable, and otherwise reports a problem and returns None.
  Checks never raise: a caller keeps going so that one load reports every mistake.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.config.locate import Path, Position
from tribuild.config.problems import Problem, describe, render_key
from tribuild.diagnostics import did_you_mean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Locates(Protocol):
        """A ``Locator``, or anything that answers as one (``load._LazyLocator``)."""

        def key(self, path: Path) -> Position: ...
        def value(self, path: Path) -> Position: ...


Check = Callable[[Path, object], object]


class Checker:
    """The problems found so far in one file, and the primitives that find them."""

    def __init__(self, path: str, locator: Locates) -> None:
        self.path = path
        self.locator = locator
        self.problems: list[Problem] = []

    def report(
        self,
        where: Path,
        message: str,
        at: Position,
        *,
        expected: str | None = None,
        help: str | None = None,
    ) -> None:
        line, column = at
        self.problems.append(
            Problem(self.path, line, column, render_key(where), message, expected, help)
        )

    def wrong(
        self, where: Path, expected: str, value: Any, item: Path = (), help: str | None = None
    ) -> None:
        """``where`` (or its array item ``item``) holds ``value``, which is not ``expected``."""
        found = describe(value) + (f" at {render_key(item)}" if item else "")
        self.report(
            where,
            f"expected {expected} for `{render_key(where)}`, found {found}",
            self.locator.value(where + item),
            expected=expected,
            help=help,
        )

    def expect(self, where: Path, value: Any, ok: Callable[[Any], object], expected: str) -> Any:
        if ok(value):
            return value
        self.wrong(where, expected, value)
        return None

    def expect_list(
        self, where: Path, value: Any, ok: Callable[[Any], object], expected: str
    ) -> list | None:
        """A non-empty array whose items all pass ``ok``; the first bad item is reported."""
        if not isinstance(value, list) or not value:
            self.wrong(where, expected, value)
            return None
        for index, item in enumerate(value):
            if not ok(item):
                self.wrong(where, expected, item, (index,))
                return None
        return value

    def table(
        self, where: Path, value: Any, allowed: tuple[str, ...], required: dict[str, str]
    ) -> dict | None:
        """A table with only ``allowed`` keys and every ``required`` one.

        ``required`` maps each required key to the help shown when it is missing.
        """
        if not isinstance(value, dict):
            self.wrong(where, "a table", value)
            return None
        noun = "section" if not where else "key"
        inside = "" if not where else f" in [{render_key(where)}]"
        names = ", ".join(allowed)
        for name in value:
            if name not in allowed:
                hint = did_you_mean(name, allowed)
                listed = f"allowed {noun}s: {names}"
                self.report(
                    where + (name,),
                    f"unknown {noun} `{name}`{inside}",
                    self.locator.key(where + (name,)),
                    expected=f"one of {names}",
                    help=f"{hint} {listed}" if hint else listed,
                )
        for name, help in required.items():
            if name not in value:
                self.report(
                    where + (name,),
                    f"missing required {noun} `{name}`{inside}",
                    self.locator.key(where),
                    help=help,
                )
        return value

    def get(self, table: dict, where: Path, key: str, default: Any, check: Check) -> Any:
        """``check`` applied to ``table[key]``, or ``default`` when the key is absent."""
        return check(where + (key,), table[key]) if key in table else default
