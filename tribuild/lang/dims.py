"""Symbolic tensor dimensions: normalised integer polynomials.

Terms:
- *dim*: one entry of a tensor shape. Either ``ANY`` (written `?`: nobody knows it) or a
  ``Dim``, an integer polynomial over *symbols* (names such as ``H`` or ``cin``) and
  *quotients* (``Quot``: a floor division or remainder that could not be simplified).
- *normal form*: a ``Dim`` stores its terms sorted with no zero coefficients, so two dims
  are equal as values exactly when their normal forms are equal: ``(H + 2*1 - 3)/1 + 1``
  and ``H`` build the same ``Dim``.
- *exact division*: ``a // b`` simplifies when ``b`` is one term that divides every term of
  ``a`` (always so for concrete numbers); otherwise it stays a ``Quot`` atom.
- *fast paths*: operations return an operand unchanged when the result is known to equal it
  (adding zero, scaling by one, substituting no symbol the dim mentions), and constants,
  symbols and monomial sort keys are memoised in bounded tables (``memo``); both give the
  same values as the general code, only sooner.

Every operation returns ``None`` for a division or remainder by zero; callers report it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tribuild.base.record import record


@record
class AnyDim:
    """`?`: unifies with every dim; arithmetic with it gives `?`."""

    def __str__(self) -> str:
        return "?"


ANY = AnyDim()


@record
class Quot:
    """``num // den`` (op "//") or ``num % den`` (op "%") kept symbolic."""

    op: str
    num: Dim
    den: Dim

    # Written out, like ``Dim``'s: the record's would reach ``num.terms`` and ``den.terms``
    # through two more Python calls (``Dim.__hash__``) at every level of a nested quotient.
    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Quot:
            return NotImplemented
        return (
            self.op == other.op
            and self.num.terms == other.num.terms
            and self.den.terms == other.den.terms
        )

    def __hash__(self) -> int:
        return hash((self.op, self.num.terms, self.den.terms))

    def __str__(self) -> str:
        return f"{_operand(self.num)} {self.op} {_operand(self.den)}"


def _operand(d: Dim) -> str:
    text = format_dim(d)
    return text if len(d.terms) <= 1 and " " not in text else f"({text})"


Atom = str | Quot
Monomial = tuple[Atom, ...]  # sorted atoms; () is the constant monomial


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


_MEMO_LIMIT = 1 << 16
_MISSING = object()
_MONOMIAL_KEYS: dict[Monomial, tuple] = {}
_CONSTS: dict[int, "Dim"] = {}
_SYMS: dict[str, "Dim"] = {}
_SYMBOLS: dict["Dim", frozenset[str]] = {}
_SUBSTITUTED: dict[tuple, "DimLike | None"] = {}


def memo(table: dict, key, make: Callable):
    """``table[key]``, computed by ``make(key)`` on a miss; a full table starts over."""
    value = table.get(key, _MISSING)
    if value is _MISSING:
        value = keep(table, key, make(key))
    return value


def keep(table: dict, key, value, limit: int = _MEMO_LIMIT):
    """``table[key] = value`` in a table of the process's remembered results, emptied first
    when it holds ``limit`` entries (a bound on memory, not a cache policy); ``value``."""
    if len(table) >= limit:
        table.clear()
    table[key] = value
    return value


def _monomial_key(m: Monomial) -> tuple:
    return (len(m), tuple(_atom_key(a) for a in m))


def _term_key(term: tuple[Monomial, int]) -> tuple:
    return memo(_MONOMIAL_KEYS, term[0], _monomial_key)


@record
class Dim:
    terms: tuple[tuple[Monomial, int], ...]  # normal form: sorted by monomial, no zero coefficient

    # Written out (the record would compare and hash a tuple holding ``terms``): dims are
    # compared and hashed more than anything else in the checker.
    def __eq__(self, other: object) -> bool:
        return self.terms == other.terms if other.__class__ is Dim else NotImplemented

    def __hash__(self) -> int:
        return hash(self.terms)

    def __str__(self) -> str:
        return format_dim(self)


DimLike = Dim | AnyDim


def _make(coeffs: Mapping[Monomial, int]) -> Dim:
    items = [(m, c) for m, c in coeffs.items() if c != 0 and m]
    if len(items) > 1:
        items.sort(key=_term_key)
    constant = coeffs.get((), 0)  # the constant monomial sorts first: it needs no sort key
    return Dim((((), constant),) + tuple(items) if constant else tuple(items))


def _const(n: int) -> Dim:
    return Dim((((), n),) if n != 0 else ())


def const(n: int) -> Dim:
    if type(n) is int:
        return _CONSTS.get(n) or memo(_CONSTS, n, _const)  # a hit without the call to ``memo``
    return _make({(): n})


def sym(name: str) -> Dim:
    return memo(_SYMS, name, lambda s: Dim((((s,), 1),)))


def _const_value(d: Dim) -> int | None:
    """``as_int`` for a ``Dim``."""
    terms = d.terms
    if not terms:
        return 0
    return terms[0][1] if len(terms) == 1 and not terms[0][0] else None


def as_int(d: DimLike) -> int | None:
    """The value of a constant dim, else None."""
    return None if isinstance(d, AnyDim) else _const_value(d)


def add(a: DimLike, b: DimLike) -> DimLike:
    if isinstance(a, AnyDim) or isinstance(b, AnyDim):
        return ANY
    kb = _const_value(b)
    if kb is not None:
        return _add_const(a, kb)
    ka = _const_value(a)
    if ka is not None:
        return _add_const(b, ka)
    coeffs = dict(a.terms)
    for m, c in b.terms:
        coeffs[m] = coeffs.get(m, 0) + c
    return _make(coeffs)


def _add_const(a: Dim, k: int) -> Dim:
    """``a + k``: the constant monomial sorts first, so only the first term changes."""
    if k == 0:
        return a
    terms = a.terms
    if terms and not terms[0][0]:
        c = terms[0][1] + k
        return Dim(((((), c),) if c != 0 else ()) + terms[1:])
    return Dim((((), k),) + terms)


def scale(a: DimLike, k: int) -> DimLike:
    if isinstance(a, AnyDim):
        return ANY
    if k == 1:
        return a
    if k == 0:
        return const(0)
    return Dim(tuple((m, c * k) for m, c in a.terms))  # same monomials: still sorted


def sub(a: DimLike, b: DimLike) -> DimLike:
    return add(a, scale(b, -1))


def mul(a: DimLike, b: DimLike) -> DimLike:
    if isinstance(a, AnyDim) or isinstance(b, AnyDim):
        return ANY
    ka = _const_value(a)
    if ka is not None:
        return scale(b, ka)
    kb = _const_value(b)
    if kb is not None:
        return scale(a, kb)
    coeffs: dict[Monomial, int] = {}
    for ma, ca in a.terms:
        for mb, cb in b.terms:
            m = tuple(sorted(ma + mb, key=_atom_key))
            coeffs[m] = coeffs.get(m, 0) + ca * cb
    return _make(coeffs)


def _divide_monomial(m: Monomial, by: Monomial) -> Monomial | None:
    rest = list(m)
    for atom in by:
        if atom not in rest:
            return None
        rest.remove(atom)
    return tuple(rest)


def _exact_quotient(a: Dim, b: Dim) -> Dim | None:
    """a / b when b is a single term dividing every term of a exactly."""
    if len(b.terms) != 1:
        return None
    ((bm, bc),) = b.terms
    out: dict[Monomial, int] = {}
    for m, c in a.terms:
        rest = _divide_monomial(m, bm)
        if rest is None or c % bc:
            return None
        out[rest] = c // bc
    return _make(out)


def floordiv(a: DimLike, b: DimLike) -> DimLike | None:
    """Floor division; None when ``b`` is zero."""
    if as_int(b) == 0:
        return None
    if isinstance(a, AnyDim) or isinstance(b, AnyDim):
        return ANY
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return const(ia // ib)
    exact = _exact_quotient(a, b)
    if exact is not None:
        return exact
    return Dim((((Quot("//", a, b),), 1),))


def mod(a: DimLike, b: DimLike) -> DimLike | None:
    """Remainder (Python's sign convention); None when ``b`` is zero."""
    if as_int(b) == 0:
        return None
    if isinstance(a, AnyDim) or isinstance(b, AnyDim):
        return ANY
    ia, ib = as_int(a), as_int(b)
    if ia is not None and ib is not None:
        return const(ia % ib)
    if _exact_quotient(a, b) is not None:
        return const(0)
    return Dim((((Quot("%", a, b),), 1),))


BINARY_OPS: dict[str, Callable[[DimLike, DimLike], DimLike | None]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": floordiv,
    "//": floordiv,
    "%": mod,
}
"""Dim arithmetic by operator; `/` between dims is floor division, as in shape formulas."""


def _rebuild(d: Dim, atom_value: Callable[[Atom], DimLike | None]) -> DimLike | None:
    """The sum of ``d``'s terms with every atom replaced by its value (None if one is None)."""
    coeffs: dict[Monomial, int] = {}
    unknown = False
    for m, c in d.terms:
        term: DimLike = const(c)
        for atom in m:
            value = atom_value(atom)
            if value is None:
                return None
            term = mul(term, value)
        if isinstance(term, AnyDim):
            unknown = True
            continue
        for tm, tc in term.terms:
            coeffs[tm] = coeffs.get(tm, 0) + tc
    return ANY if unknown else _make(coeffs)


def substitute(d: DimLike, mapping: Mapping[str, DimLike]) -> DimLike | None:
    """Replace symbols by dims and re-normalise; None if a quotient's divisor becomes 0."""
    if isinstance(d, AnyDim):
        return ANY
    if not mapping:
        return d
    relevant = tuple([(name, mapping[name]) for name in symbols(d) if name in mapping])
    if not relevant:
        return d  # re-normalising a normal form changes nothing
    return memo(_SUBSTITUTED, (d, relevant), _substitute)


def _substitute(key: tuple[Dim, tuple[tuple[str, DimLike], ...]]) -> DimLike | None:
    d, relevant = key
    mapping = dict(relevant)

    def atom_value(atom: Atom) -> DimLike | None:
        if isinstance(atom, str):
            return mapping.get(atom, sym(atom))
        num, den = substitute(atom.num, mapping), substitute(atom.den, mapping)
        if num is None or den is None:
            return None
        return (floordiv if atom.op == "//" else mod)(num, den)

    return _rebuild(d, atom_value)


def symbols(d: DimLike) -> frozenset[str]:
    """Every symbol in ``d``, quotients included."""
    if isinstance(d, AnyDim):
        return frozenset()
    found = _SYMBOLS.get(d)  # a hit without the call to ``memo``
    return found if found is not None else memo(_SYMBOLS, d, _collect_symbols)


def _collect_symbols(d: Dim) -> frozenset[str]:
    out: set[str] = set()
    for m, _ in d.terms:
        for atom in m:
            if isinstance(atom, str):
                out.add(atom)
            else:
                out |= symbols(atom.num) | symbols(atom.den)
    return frozenset(out)


def linear_coefficient(d: Dim, name: str) -> int | None:
    """The coefficient ``c`` when ``d == c*name + rest`` with ``name`` absent from ``rest``."""
    coeff = dict(d.terms).get((name,))
    if coeff is None:
        return None
    rest = sub(d, scale(sym(name), coeff))
    return None if name in symbols(rest) else coeff


def _shown(atom: Atom) -> str:
    """A symbol as the user wrote it: the checker renames a callee's dims apart (``N'3``, a
    spelling no identifier has); messages show the name of the declaration (``N``)."""
    if isinstance(atom, str):
        return atom.split("'", 1)[0]
    return f"({atom})"


def _format_monomial(m: Monomial) -> str:
    if len(m) == 1:
        return _shown(m[0]) if isinstance(m[0], str) else str(m[0])
    return "*".join(_shown(a) for a in m)


def format_dim(d: DimLike) -> str:
    """Readable text, e.g. ``2*c + 1``; used in messages."""
    if isinstance(d, AnyDim):
        return "?"
    if not d.terms:
        return "0"
    parts: list[str] = []
    for m, c in sorted(d.terms, key=lambda mc: -len(mc[0])):  # highest degree first
        sign = "-" if c < 0 else "+"
        mag = abs(c)
        body = (
            str(mag)
            if m == ()
            else _format_monomial(m)
            if mag == 1
            else f"{mag}*{_format_monomial(m)}"
        )
        parts.append(f"{sign} {body}")
    text = " ".join(parts)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]
