"""Query declarations: ``@input_query`` and ``@derived``.

Terms:
- *query*: a function ``f(db, *args)`` wrapped in a ``Query``; calling it with a database reads
  the key ``(f, args)`` through that database (memo hit, verify or execute) and, inside
  another query, records the dependency. Arguments must be hashable and positional.
- *input query*: a query whose values are set from outside with ``db.set``; its body is
  never run.
- *derived query*: a pure function of the queries it reads.
- *name*: the function's ``__name__``, used in stats, logs and explanations.
- *ident*: ``module.qualname``, the query's identity in a persisted store; ``REGISTRY`` maps
  idents to the query last declared under them.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.engine.fetch import fetch

REGISTRY: dict[str, "Query"] = {}


class Query:
    __slots__ = ("fn", "name", "ident", "is_input", "lru", "__wrapped__", "__doc__")

    def __init__(self, fn: Callable[..., Any], is_input: bool, lru: int | None) -> None:
        if lru is not None and lru < 1:
            raise ValueError("lru must be a positive number of values")
        self.fn = fn
        self.name = fn.__name__
        self.ident = f"{fn.__module__}.{fn.__qualname__}"
        self.is_input = is_input
        self.lru = lru
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        REGISTRY[self.ident] = self

    def __call__(self, db: Any, *args: Any) -> Any:
        return fetch(db, self, args)

    def __repr__(self) -> str:
        kind = "input" if self.is_input else "derived"
        return f"<{kind} query {self.ident}>"


TYPE_CHECKING = False
if TYPE_CHECKING:
    # Type checkers see a query as a Query called as the function it wraps is: with the same
    # arguments, it returns what the function returns.
    from typing import Any, Generic, ParamSpec, TypeVar, overload

    _P = ParamSpec("_P")
    _R = TypeVar("_R")

    class TypedQuery(Query, Generic[_P, _R]):
        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...

    def input_query(fn: Callable[_P, _R]) -> TypedQuery[_P, _R]: ...

    @overload
    def derived(fn: Callable[_P, _R]) -> TypedQuery[_P, _R]: ...
    @overload
    def derived(
        fn: None = None, *, lru: int | None = None
    ) -> Callable[[Callable[_P, _R]], TypedQuery[_P, _R]]: ...
    def derived(
        fn: Callable[_P, _R] | None = None, *, lru: int | None = None
    ) -> TypedQuery[_P, _R] | Callable[[Callable[_P, _R]], TypedQuery[_P, _R]]: ...

else:

    def input_query(fn: Callable) -> Query:
        return Query(fn, is_input=True, lru=None)

    def derived(fn: Callable | None = None, *, lru: int | None = None):
        """``@derived`` or ``@derived(lru=N)``: keep at most N values of this query
        (dependency records of evicted values are kept)."""
        if fn is None:
            return lambda f: Query(f, is_input=False, lru=lru)
        return Query(fn, is_input=False, lru=lru)
