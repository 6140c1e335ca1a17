"""Property: a target that `tribuild check` reports clean builds, and so does every layer.

Every error a build can report for a target, `check` reports first; and for every layer of
every checked file, target or not, what `tribuild compile FILE` would refuse (issue 37).
Over the mutated zoo (``test_fuzz_frontend``'s token edits of ``models/**``, plus edits that
more often leave a program that checks: small integer literals, and a type annotation dropped,
as a user in a hurry writes `fn forward(x)`), whenever the check of the edited file, the files
importing it and the Tribuild.toml targets they reach reports no error, each of those targets'
builds (``target_build``: the front end, lowering, optimization, code generation) gives its
files and no diagnostic, and so does the build of every layer of those files whose construction
parameters all have defaults (what ``tribuild compile FILE --target LAYER`` builds without
``--arg``). A layer with parameters without defaults is checked by ``check`` symbolically; its
builds are the targets'.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.queries.fuzz_programs import programs
from tests.queries.test_fuzz_frontend import (
    _COMMON,
    IMPORTERS,
    TARGETS,
    ZOO,
    ZOO_TEXT,
    edit,
    edits,
    hang_guard,
    write_project,
)
from tests.queries.zoo import REPO
from tribuild.config.load import load_config
from tribuild.driver.check import target_diagnostics
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.queries.codegen import target_build
from tribuild.queries.lower import file_lowering_report
from tribuild.queries.report import file_diagnostics
from tribuild.queries.semantic import has_defaults, signature
from tribuild.queries.syntax import item_index
from tribuild.queries.targets import target_report

NAMES = {
    (t.entry_path, t.entry_layer, t.args, t.input): t.name
    for t in load_config(REPO / "Tribuild.toml").targets
}
MODELS = tuple(p for p in ZOO if p.startswith("models/"))
ANNOTATION = re.compile(r"(:|->)\s*(Tensor|TernaryTensor)<[^>]*>")


def gentle_edit(text: str, kind: str, at: int, pick: int) -> str:
    """An edit that often keeps a program valid: an integer literal set to a small number,
    or one tensor annotation (a parameter's, a `let`'s, a result's) removed."""
    if kind == "small_int":
        found = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", text))
        if not found:
            return text
        m = found[at % len(found)]
        return text[: m.start()] + str((1, 2, 3, 4, 8, 16)[pick % 6]) + text[m.end() :]
    found = list(ANNOTATION.finditer(text))
    if not found:
        return text
    m = found[at % len(found)]
    return text[: m.start()] + text[m.end() :]


changes = st.lists(
    st.tuples(
        st.sampled_from(("small_int", "small_int", "untype", "layer", "dtype")),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=2,
)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    write_project(root, ZOO_TEXT)
    return root


def default_layers(db, paths) -> list[tuple[str, str]]:
    """(path, layer) of every layer of ``paths`` that `compile` builds without ``--arg``."""
    return [
        (p, e.name)
        for p in paths
        for e in item_index(db, p)
        if e.kind == "layer"
        and e.name is not None
        and has_defaults(signature(db, p, e.id).signature)
    ]


def check_then_build(zoo: Path, path: str, changes) -> None:
    text = ZOO_TEXT[path]
    for kind, at, pick in changes:
        text = (gentle_edit if kind in ("small_int", "untype") else edit)(text, kind, at, pick)
    (zoo / path).write_text(text)
    try:
        entries = (path,) + IMPORTERS.get(path, ())
        targets = [t for t in TARGETS if t[0] in entries]
        db = Database()
        with hang_guard():
            closure = load_sources(db, str(zoo), entries)
            errors = [
                d for p in closure for d in file_diagnostics(db, p) + file_lowering_report(db, p)
            ]
            reports = [(t, target_report(db, *t)) for t in targets]
            errors += [d for _, r in reports for d in target_diagnostics(db, r)]
            if any(d.severity == "error" for d in errors) or any(
                r.root is None for _, r in reports
            ):
                return
            for t, _ in reports:
                built = target_build(db, NAMES[t], *t, "2")
                assert built.problem is None and built.diagnostics == (), (NAMES[t], built)
                assert built.files, NAMES[t]
            for p, layer in default_layers(db, closure):
                built = target_build(db, "m", p, layer, (), None, "2")
                assert built.problem is None and built.diagnostics == (), (p, layer, built)
                assert built.files, (p, layer)
    finally:
        (zoo / path).write_text(ZOO_TEXT[path])


@settings(max_examples=examples(25), derandomize=True, **_COMMON)
@given(path=st.sampled_from(MODELS), changes=edits)
def test_check_clean_means_build_succeeds(zoo, path, changes):
    check_then_build(zoo, path, changes)


@settings(max_examples=examples(25), derandomize=True, **_COMMON)
@given(path=st.sampled_from(MODELS), changes=changes)
def test_check_clean_means_build_succeeds_gentle_edits(zoo, path, changes):
    check_then_build(zoo, path, changes)


def test_untyped_forward_is_reported_by_check(tmp_path):
    """The reproduction of issue 28: an untyped `forward` in a layer another layer calls was
    clean for `check` and E0601 for `build`; `check` now reports E0313 at the `forward`."""
    write_project(
        tmp_path,
        {
            "net.tri": "layer Inner(c: int) {\n    let fc = Linear(c, c)\n"
            "    fn forward(x) {\n        return fc(x)\n    }\n}\n"
            "layer Net(c: int = 4) {\n    let a = Inner(c)\n"
            "    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {\n"
            "        return a(x)\n    }\n}\n"
        },
    )
    db = Database()
    load_sources(db, str(tmp_path), ("net.tri",))
    report = target_report(db, "net.tri", "Net", (), (1, 4))
    codes = sorted({d.code for d in target_diagnostics(db, report)})
    assert codes == ["E0313"]


def test_check_reports_what_codegen_refuses(tmp_path):
    """A layer built inside `forward` passes the checker; codegen refuses it (E0601), and
    `check` says so for the target."""
    write_project(
        tmp_path,
        {
            "net.tri": "layer Bad(c: int = 2) {\n    let fc = Linear(c, c)\n"
            "    fn forward(x: Tensor<float32, [N, c]>) -> Tensor<float32, [N, c]> {\n"
            "        let m = Linear(c, c)\n        return m(x)\n    }\n}\n"
        },
    )
    db = Database()
    load_sources(db, str(tmp_path), ("net.tri",))
    report = target_report(db, "net.tri", "Bad", (), (1, 2))
    assert [d.code for d in report.diagnostics] == []
    assert [d.code for d in target_diagnostics(db, report)] == ["E0601"]


@settings(max_examples=examples(25), derandomize=True, **_COMMON)
@given(program=programs())
def test_check_clean_means_every_default_layer_builds(tmp_path_factory, program):
    """Over generated programs (``fuzz_programs``, no target at all): when `check` of the
    file reports no error, every layer it defines with defaults for all its parameters
    builds (``tribuild compile FILE --target LAYER``)."""
    root = tmp_path_factory.mktemp("gen")
    write_project(root, {"gen.tri": program[0]})
    db = Database()
    with hang_guard():
        load_sources(db, str(root), ("gen.tri",))
        found = file_diagnostics(db, "gen.tri") + file_lowering_report(db, "gen.tri")
        if any(d.severity == "error" for d in found):
            return
        for p, layer in default_layers(db, ("gen.tri",)):
            built = target_build(db, "m", p, layer, (), None, "2")
            assert built.problem is None and built.diagnostics == (), (layer, built)


def test_a_layer_no_target_reaches_is_checked_for_codegen(tmp_path):
    """Issue 37: a layer no target reaches, with and without defaults, applies a layer it
    builds in `forward`: `check` reports E0601 at the `let`, the application as a second
    label, and the help that moves it into the layer's body."""
    write_project(
        tmp_path,
        {
            "x.tri": "layer X(hidden: int = 32) {\n    let fc = Linear(10, hidden)\n"
            "    fn forward(x: Tensor<float32, [N, 10]>) -> Tensor<float32, [N, 10]> {\n"
            "        let extra = Linear(hidden, 10)\n        return extra(fc(x))\n    }\n}\n"
            "layer Y(hidden: int, deep: bool) {\n    let fc = Linear(10, hidden)\n"
            "    fn forward(x: Tensor<float32, [N, 10]>) -> Tensor<float32, [N, hidden]> {\n"
            "        if deep {\n            return fc(x)\n        }\n"
            "        let extra = Linear(10, hidden)\n        return extra(x)\n    }\n}\n"
        },
    )
    db = Database()
    load_sources(db, str(tmp_path), ("x.tri",))
    assert [d.code for d in file_diagnostics(db, "x.tri")] == []
    found = file_lowering_report(db, "x.tri")
    assert [d.code for d in found] == ["E0601", "E0601"]
    for d, let in zip(found, ("Linear(hidden, 10)", "Linear(10, hidden)"), strict=True):
        assert d.primary.message == "`extra` is built here, inside `forward`"
        assert [s.message for s in d.secondary] == ["and applied here"]
        assert d.help == (
            f"make it a member: move `let extra = {let}` into the layer's body, beside its "
            "other members"
        )
    built = target_build(db, "x", "x.tri", "X", (), None, "2")
    assert [d.code for d in built.diagnostics] == ["E0601"]
