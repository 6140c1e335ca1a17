"""Dims: normalisation, evaluation, substitution, unification; the memos and bounds built on them
(window sizes, trackable dims) and POISON across a store round trip."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import tribuild.queries  # noqa: F401  (registers the value classes with the codec)
from tests.budget import examples
from tribuild.engine.store import codec
from tribuild.lang import dims
from tribuild.lang.builtins.shapes import Site, window
from tribuild.lang.check.calls import new_ctx
from tribuild.lang.check.codes import Sink
from tribuild.lang.check.env import DictEnv
from tribuild.lang.check.unify import Unifier, definitely_different
from tribuild.lang.check.values import (
    DIM_SIZE_LIMIT,
    INT64_MAX,
    POISON,
    Sym,
    Unk,
    is_poison,
    trackable,
)
from tribuild.lang.types import ScalarT

NAMES = ("H", "W", "c")
ENV = st.fixed_dictionaries({n: st.integers(1, 50) for n in NAMES})


@st.composite
def exprs(draw, depth: int = 3):
    """(Dim, python function of an env) pairs built from + - * and // by constants."""
    if depth == 0 or draw(st.booleans()):
        if draw(st.booleans()):
            n = draw(st.integers(-5, 5))
            return dims.const(n), lambda env, n=n: n
        name = draw(st.sampled_from(NAMES))
        return dims.sym(name), lambda env, name=name: env[name]
    op = draw(st.sampled_from("+-*/"))
    (a, fa), (b, fb) = draw(exprs(depth - 1)), draw(exprs(depth - 1))
    if op == "/":
        k = draw(st.integers(1, 4))
        return dims.floordiv(a, dims.const(k)), lambda env: fa(env) // k
    fn = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    return dims.BINARY_OPS[op](a, b), lambda env: fn(fa(env), fb(env))


def evaluate(d, env):
    return dims.as_int(dims.substitute(d, {k: dims.const(v) for k, v in env.items()}))


@settings(max_examples=examples(200), deadline=None)
@given(exprs(), ENV)
def test_normal_form_preserves_value(pair, env):
    d, fn = pair
    assert evaluate(d, env) == fn(env)


@settings(max_examples=examples(200), deadline=None)
@given(exprs())
def test_normalisation_is_idempotent(pair):
    d, _ = pair
    assert dims.substitute(d, {}) == d


@settings(max_examples=examples(100), deadline=None)
@given(exprs(), exprs(), ENV)
def test_addition_commutes_and_cancels(p, q, env):
    (a, _), (b, _) = p, q
    assert dims.add(a, b) == dims.add(b, a)
    assert dims.sub(dims.add(a, b), b) == a


def test_conv_formula_collapses_to_identity():
    H = dims.sym("H")
    out = dims.add(
        dims.floordiv(dims.sub(dims.add(H, dims.const(2 * 1)), dims.const(3)), dims.const(1)),
        dims.const(1),
    )
    assert out == H
    assert dims.format_dim(out) == "H"


def test_exact_and_symbolic_division():
    c = dims.sym("c")
    assert dims.floordiv(dims.scale(c, 4), dims.const(2)) == dims.scale(c, 2)
    assert dims.floordiv(dims.mul(c, dims.sym("k")), c) == dims.sym("k")
    kept = dims.floordiv(dims.sub(dims.sym("H"), dims.const(1)), dims.sym("s"))
    assert dims.format_dim(kept) == "(H - 1) // s"
    assert dims.substitute(kept, {"H": dims.const(9), "s": dims.const(2)}) == dims.const(4)
    assert dims.floordiv(c, dims.const(0)) is None and dims.mod(c, dims.const(0)) is None


def test_any_is_absorbing():
    assert dims.add(dims.ANY, dims.const(1)) is dims.ANY
    assert dims.mul(dims.sym("c"), dims.ANY) is dims.ANY


def test_symbolic_dims_differ_but_quotients_are_undecided():
    c = dims.sym("c")
    assert definitely_different(c, dims.scale(c, 2))
    assert not definitely_different(c, c)
    q = dims.floordiv(dims.sym("k"), dims.const(2))
    assert not definitely_different(dims.scale(q, 2), dims.sym("k"))


def test_unifier_binds_flexible_names_linearly():
    u = Unifier({"h"})
    assert u.dim(dims.add(dims.scale(dims.sym("h"), 2), dims.const(1)), dims.const(9))
    assert u.resolve(dims.sym("h")) == dims.const(4)
    assert not u.dim(dims.sym("h"), dims.const(5))  # h is already 4
    assert not Unifier({"h"}).dim(
        dims.scale(dims.sym("h"), 2), dims.const(9)
    )  # no integer solution
    assert Unifier().dim(dims.ANY, dims.sym("H"))
    assert not Unifier().dim(dims.sym("cin"), dims.sym("cout"))  # rigid names


@settings(max_examples=examples(200), deadline=None)
@given(exprs(), st.integers(1, 5))
def test_lone_flexible_name_binds_as_the_general_solve_does(pair, k):
    """``h`` against ``found`` (bound directly) and ``h + k`` against ``found + k`` (solved)
    give ``h`` the same value; ``found`` names no flexible symbol."""
    found, _ = pair
    direct, solved = Unifier({"h"}), Unifier({"h"})
    assert direct.dim(dims.sym("h"), found)
    assert solved.dim(dims.add(dims.sym("h"), dims.const(k)), dims.add(found, dims.const(k)))
    assert direct.resolve(dims.sym("h")) == solved.resolve(dims.sym("h")) == found


def test_unbound_flexible_name_resolves_to_any():
    assert Unifier({"x"}).resolve(dims.add(dims.sym("x"), dims.const(1))) is dims.ANY


def _window_from_scratch(size, kernel, stride, padding):
    """The window formula of ``builtins_shapes`` without its memo, for comparison."""
    out = dims.floordiv(dims.sub(dims.add(size, dims.scale(padding, 2)), kernel), stride)
    return None if out is None else trackable(dims.add(out, dims.const(1)))


@settings(max_examples=examples(200), deadline=None)
@given(exprs(), st.integers(1, 7), st.integers(0, 3), st.integers(0, 3))
def test_memoised_window_matches_the_formula(pair, kernel, stride, padding):
    d, _ = pair
    ctx = new_ctx(Sink("m.tri", "L"), DictEnv("m.tri"))
    site = Site(ctx, (0, 1), (0, 1), "pool")
    expected = _window_from_scratch(d, dims.const(kernel), dims.const(stride), dims.const(padding))
    for _ in range(2):  # the second call is answered by the memo and must report the same
        got = window(d, kernel, stride, padding, site)
        n = None if expected is None else dims.as_int(expected)
        assert got == (dims.ANY if expected is None or (n is not None and n <= 0) else expected)
    assert len(ctx.sink.diags) == (2 if expected is None or (n is not None and n <= 0) else 0)


@settings(max_examples=examples(200), deadline=None)
@given(exprs())
def test_memo_hits_equal_fresh_results(pair):
    d, _ = pair
    assert dims.symbols(d) == dims._collect_symbols(d)
    for n in (0, 1, -3, 2**70):
        assert dims.const(n) == dims._const(n)


def test_trackable_bounds_size_and_coefficients():
    small = dims.add(dims.sym("H"), dims.const(1))
    assert trackable(small) is small
    big = dims.const(1)
    for i in range(DIM_SIZE_LIMIT):
        big = dims.add(big, dims.sym(f"s{i}"))
    assert trackable(big) is dims.ANY
    assert trackable(dims.scale(dims.sym("H"), INT64_MAX + 1)) is dims.ANY
    nested = dims.floordiv(dims.floordiv(big, dims.sym("k")), dims.sym("j"))
    assert trackable(nested) is dims.ANY  # the size of a quotient counts its operands


def test_poison_from_the_store_is_still_poison():
    decoded = codec.decode(codec.encode((POISON, [POISON])))
    assert decoded[0] is not POISON and is_poison(decoded[0]) and is_poison(decoded[1][0])
    assert not any(is_poison(v) for v in (0, (), Unk(ScalarT("int64")), Sym(dims.sym("H"))))
