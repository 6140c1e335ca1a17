"""Unification of dims and tensor types, and joins of values from alternative paths.

Terms:
- *flexible* symbol: a dim name that unification may bind (the free dims of a callee's
  parameter types, renamed apart; names first written in a return or `let` annotation).
  Every other symbol is *rigid*: it stands for one fixed but unknown integer.
- *definitely different*: two dims whose difference normalises to a nonzero polynomial free
  of quotients, or, when it involves a symbolic floor division or remainder, is nonzero at
  every sample point (each symbol set to each of ``SAMPLES``, and on a diagonal beyond two
  symbols): `(H - 2) / 2 + 1` (a 2x2 pooling) is never `H`. A difference zero somewhere
  (`2*(k/2) - k + 1`, zero for odd `k`) is accepted here; checking a concrete instance,
  which has numbers, decides it.
- *join*: what a value is known to be when it comes from one of several paths (the branches
  of a condition unknown during generic checking, or an unknown number of loop iterations):
  equal parts stay, differing dims become `?`.
"""

from __future__ import annotations

from tribuild.lang import dims
from tribuild.lang.check.codes import DIM_MISMATCH, RANK_MISMATCH, TYPE_MISMATCH
from tribuild.lang.check.values import (
    Choice,
    TensorV,
    Unk,
    UnkList,
    Value,
    as_dim,
    from_dim,
    is_int,
)
from tribuild.lang.dims import ANY, AnyDim, Dim, DimLike, Quot
from tribuild.lang.types import ScalarT, TensorT, format_shape


def _has_quotient(d: Dim) -> bool:
    return any(isinstance(a, Quot) for m, _ in d.terms for a in m)


def _lone_symbol(d: Dim) -> str | None:
    """``name`` when ``d`` is the symbol ``name`` alone (coefficient 1), else None."""
    terms = d.terms
    if (
        len(terms) == 1
        and terms[0][1] == 1
        and len(terms[0][0]) == 1
        and terms[0][0][0].__class__ is str
    ):
        return terms[0][0][0]
    return None


SAMPLES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 28, 32, 56, 64, 224)


def definitely_different(a: DimLike, b: DimLike) -> bool:
    if a == b:
        return False  # the difference is 0 (or `?`)
    diff = dims.sub(a, b)
    if not isinstance(diff, Dim) or not diff.terms:
        return False
    return not _has_quotient(diff) or all(_value(diff, p) != 0 for p in _points(diff))


def _points(d: Dim) -> list[dict[str, int]]:
    """Where to evaluate ``d``: every combination of ``SAMPLES`` for up to two symbols, the
    diagonal and its shifts beyond (so the number of points stays small)."""
    names = sorted(dims.symbols(d))
    if len(names) == 1:
        return [{names[0]: v} for v in SAMPLES]
    if len(names) == 2:
        return [{names[0]: v, names[1]: w} for v in SAMPLES for w in SAMPLES]
    n = len(SAMPLES)
    return [
        {name: SAMPLES[(i + k * j) % n] for k, name in enumerate(names)}
        for i in range(n)
        for j in range(n)
    ]


def _value(d: Dim, point: dict[str, int]) -> int | None:
    """``d`` at ``point``; None where a divisor is zero."""
    total = 0
    for monomial, coeff in d.terms:
        term = coeff
        for atom in monomial:
            if isinstance(atom, str):
                term *= point[atom]
                continue
            num, den = _value(atom.num, point), _value(atom.den, point)
            if num is None or not den:
                return None
            term *= num // den if atom.op == "//" else num % den
        total += term
    return total


class Unifier:
    """Binds flexible symbols so that expected dims equal found ones."""

    def __init__(self, flexible: frozenset[str] | set[str] = frozenset()):
        self.flexible = set(flexible)
        self.subst: dict[str, DimLike] = {}

    def apply(self, d: DimLike) -> DimLike:
        if not self.subst:
            return d
        out = dims.substitute(d, self.subst)
        return ANY if out is None else out

    def resolve(self, d: DimLike) -> DimLike:
        """``d`` with bindings applied; a dim still mentioning a flexible symbol becomes `?`."""
        out = self.apply(d)
        return ANY if self.flexible and dims.symbols(out) & self.flexible else out

    def dim(self, expected: DimLike, found: DimLike) -> bool:
        e, f = self.apply(expected), self.apply(found)
        if e == f or isinstance(e, AnyDim) or isinstance(f, AnyDim):
            return True
        if dims.as_int(e) is not None and dims.as_int(f) is not None:
            return False  # two different numbers
        name = _lone_symbol(e)
        if name in self.flexible and not dims.symbols(f) & self.flexible:
            self.subst[name] = f  # what solving ``f - name == 0`` below gives, sooner
            return True
        diff = dims.sub(f, e)
        unbound = sorted(dims.symbols(diff) & self.flexible)
        for name in unbound:
            assert isinstance(diff, Dim)  # it has symbols, so it is not `?`
            coeff = dims.linear_coefficient(diff, name)
            if coeff is None:
                continue
            rest = dims.sub(diff, dims.scale(dims.sym(name), coeff))
            value = dims.floordiv(dims.scale(rest, -1), dims.const(coeff))
            if value is None or dims.mul(value, dims.const(coeff)) != dims.scale(rest, -1):
                return dims.as_int(rest) is None  # no integer solution; undecided if symbolic
            self.subst[name] = value
            return True
        if unbound:
            return True  # bound only inside a quotient: cannot solve, accept
        return not definitely_different(e, f)

    def tensor(self, expected: TensorT, found: TensorT) -> tuple[str, str] | None:
        """None when ``found`` fits ``expected``; else ``(code, what differs)``."""
        if expected.dtype != found.dtype:
            return TYPE_MISMATCH, f"dtype is `{found.dtype}`, expected `{expected.dtype}`"
        if expected.dims is None or found.dims is None:
            return None
        if len(expected.dims) != len(found.dims):
            return RANK_MISMATCH, f"rank is {len(found.dims)}, expected {len(expected.dims)}"
        for i, (e, f) in enumerate(zip(expected.dims, found.dims, strict=True)):
            if not self.dim(e, f):
                return DIM_MISMATCH, (
                    f"dim {i} is {dims.format_dim(self.apply(f))}, "
                    f"expected {dims.format_dim(self.apply(e))}"
                )
        return None

    def resolve_type(self, t: TensorT) -> TensorT:
        if t.dims is None:
            return t
        return TensorT(t.dtype, tuple(self.resolve(d) for d in t.dims), t.ternary)

    def describe(self, t: TensorT) -> str:
        if t.dims is None:
            return str(t)
        head = "TernaryTensor" if t.ternary else "Tensor"
        return f"{head}<{t.dtype}, {format_shape(tuple(self.apply(d) for d in t.dims))}>"


def join_dims(a: DimLike, b: DimLike) -> DimLike:
    return a if a == b else ANY


def join_types(a: TensorT, b: TensorT) -> TensorT:
    dtype = a.dtype if a.dtype == b.dtype else "float32"
    if a.dims is None or b.dims is None or len(a.dims) != len(b.dims):
        return TensorT(dtype, None, a.ternary and b.ternary)
    return TensorT(
        dtype,
        tuple(join_dims(x, y) for x, y in zip(a.dims, b.dims, strict=True)),
        a.ternary and b.ternary,
    )


def join(a: Value, b: Value) -> Value:
    """A value known to be ``a`` or ``b``."""
    if a == b and type(a) is type(b):
        return a
    if isinstance(a, TensorV) and isinstance(b, TensorV):
        return TensorV(join_types(a.type, b.type))
    if is_int(a) and is_int(b):
        return from_dim(join_dims(as_dim(a), as_dim(b)))
    if isinstance(a, UnkList) and isinstance(b, UnkList):
        return a if a.elem is None else b if b.elem is None else UnkList(join(a.elem, b.elem))
    options = (a.options if isinstance(a, Choice) else (a,)) + (
        b.options if isinstance(b, Choice) else (b,)
    )
    for scalar in (ScalarT("bool"), ScalarT("float32")):
        if all(_scalar_of(o) == scalar for o in options):
            return Unk(scalar)
    return Choice(tuple(dict.fromkeys(options)))


def _scalar_of(v: Value) -> ScalarT | None:
    if isinstance(v, Unk) and isinstance(v.type, ScalarT):
        return v.type
    if type(v) is bool:
        return ScalarT("bool")
    return ScalarT("float32") if type(v) is float else None
