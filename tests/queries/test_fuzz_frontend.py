"""Fuzzing the whole front end through the query layer: parse, names, check, instantiate.

Every input goes through what ``tribuild check`` runs: ``load_sources`` on a temporary project,
``file_diagnostics`` of every file of the import closure (syntax, names, the generic check of
every item, the instances of every layer whose parameters all have defaults) and
``target_report`` for targets. Properties:
- no exception escapes (DESIGN invariant 4) and no input hangs: a guard turns a run longer
  than ``HANG_SECONDS`` into a failure, since the same input would hang ``tribuild check``;
- every label of every diagnostic locates inside its file: the file was loaded, the item
  exists in its ``item_index``, the token span lies inside that item, and the character range
  ``QuerySources.char_range`` gives lies inside the text.

Inputs:
- *mutated zoo*: token-level edits of ``models/**`` and ``examples/seed_style/**`` (delete,
  duplicate, swap, replace by a grammar token, integer literals set to 0, -1 or huge values,
  layer names and dtypes swapped, imports dropped), checked with the files importing the edited
  one and the Tribuild.toml targets they reach;
- *generated programs*: ``fuzz_programs.programs``, valid syntax with random semantics, plus
  a target on one of its layers with random arguments and input shape;
- *adversarial*: ``ADVERSARIAL`` (deep nesting, construction-time ranges up to 10**12, division
  by zero in dims, negative dims, empty conv outputs) and files of valid layers of 100 KB and 1 MB;
- *regressions*: ``tests/fixtures/fuzz_regressions/*.tri``, minimized inputs of bugs this
  fuzzer found; the first line ``# expect: CODE ...`` lists the codes the file must report
  (exactly), and ``# xfail: why`` marks a bug whose fix belongs to another module.

Observed cost (runs of 300 and 700 examples, a clean database per run, on a shared 2-core machine
with a load of about 7): a mutated-zoo run takes 1.3 to 120 ms per KB of loaded source (median
10 to 15, 90th percentile 35 to 50); the slow end is an edit whose file reaches the ResNet
targets, whose cost grows with the instances built, not with the text. Generated programs take
4 to 900 ms/KB (files of 0.5 to 3 KB: fixed costs and construction-time work up to the 10**6-step
bound dominate). The 100 KB file of valid layers takes about 2 s, the 1 MB one 20 to 35 s (20 to
35 ms/KB, linear), so the latter runs with the slow tests.
Nothing here asserts on time.
"""

from __future__ import annotations

import re
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.queries.fuzz_programs import DTYPES, programs
from tests.queries.zoo import REPO
from tribuild.config.load import load_config
from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.lang.builtins.layers import LAYERS
from tribuild.lang.syntax.lexer import lex
from tribuild.queries.names import import_targets
from tribuild.queries.report import QuerySources, file_diagnostics
from tribuild.queries.syntax import item_index, lexed
from tribuild.queries.targets import target_report

HANG_SECONDS = 60
REGRESSIONS = REPO / "tests" / "fixtures" / "fuzz_regressions"
TARGETS = tuple(
    (t.entry_path, t.entry_layer, t.args, t.input)
    for t in load_config(REPO / "Tribuild.toml").targets
)
_COMMON = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
FAST = settings(max_examples=examples(100), derandomize=True, **_COMMON)
SLOW = settings(max_examples=150, **_COMMON)


class Hang(Exception):
    pass


@contextmanager
def hang_guard(seconds: float = HANG_SECONDS):
    """Raise ``Hang`` in the main thread after ``seconds`` (elsewhere: no guard)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise Hang(f"the front end ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_located(db, closure: tuple[str, ...], diags) -> None:
    sources = QuerySources(db)
    for d in diags:
        for label in (d.primary, *d.secondary):
            loc = label.loc
            assert loc.path in closure, d
            if loc.item is None:
                limit = len(lexed(db, loc.path))
            else:
                entry = next((e for e in item_index(db, loc.path) if e.id == loc.item), None)
                assert entry is not None, f"no item {loc.item!r} in {loc.path}: {d}"
                limit = entry.end - entry.start
            assert 0 <= loc.span[0] <= loc.span[1] <= limit, d
            start, end = sources.char_range(loc)
            assert 0 <= start <= end <= len(sources.text(loc.path)), d


def front_end(
    root: Path, entries: tuple[str, ...], targets=(), seconds: float = HANG_SECONDS
) -> list:
    """Every diagnostic ``tribuild check`` gives for ``entries`` (and their imports) and
    ``targets`` (entry path, layer, args, input shape), after checking that each is located."""
    db = Database()
    with hang_guard(seconds):
        closure = load_sources(db, str(root), entries)
        diags = [d for path in closure for d in file_diagnostics(db, path)]
        for target in targets:
            report = target_report(db, *target)
            assert report.root is not None or report.problem, target
            diags.extend(report.diagnostics)
    assert_located(db, closure, diags)
    return diags


def write_project(root: Path, files: dict[str, str]) -> tuple[str, ...]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return tuple(sorted(files))


# -- the mutated zoo ---------------------------------------------------------------------

ZOO = scan(str(REPO), ("models", "examples/seed_style"))
ZOO_TEXT = {p: (REPO / p).read_text() for p in ZOO}
INTS = (
    "0",
    "-1",
    "1",
    "3",
    "1000000000",
    "1000000000000",
    "9223372036854775807",
    "99999999999999999999999",
)
WORDS = (
    "import from layer fn let return if else for in true false x N ? Tensor TernaryTensor trit int "
    "0 1 -1 3.14 \"p.tri\" + - * / // % ** @ == != < <= > >= && || ! : = -> , . .. ( ) [ ] { } ; "
    "\n "
    "relu reshape concat permute Sequential forward"
).split(" ")
EDITS = ("delete", "duplicate", "swap", "replace", "int", "layer", "dtype", "drop_import")


def _zoo_layers() -> tuple[str, ...]:
    names = set(LAYERS)
    for text in ZOO_TEXT.values():
        names.update(re.findall(r"^layer\s+(\w+)", text, re.M))
    return tuple(sorted(names))


LAYER_NAMES = _zoo_layers()


def _importers() -> dict[str, tuple[str, ...]]:
    db = Database()
    load_sources(db, str(REPO), ZOO)
    out: dict[str, list[str]] = {p: [] for p in ZOO}
    for path in ZOO:
        for target in import_targets(db, path):
            out.setdefault(target, []).append(path)
    return {p: tuple(v) for p, v in out.items()}


IMPORTERS = _importers()


def edit(text: str, kind: str, at: int, pick: int) -> str:
    """One token-level edit of ``text``; ``at`` and ``pick`` choose where and what."""
    toks = [t for t in lex(text) if t.kind != "newline"]
    choose = {
        "int": lambda t: t.kind == "int",
        "layer": lambda t: t.text in LAYER_NAMES,
        "dtype": lambda t: t.text in DTYPES,
        "drop_import": lambda t: t.kind in ("import", "from"),
    }
    if kind in choose:
        toks = [t for t in toks if choose[kind](t)]
    if not toks:
        return text
    tok = toks[at % len(toks)]
    start, end = tok.offset, tok.offset + len(tok.text)
    if kind == "drop_import":
        end = text.find("\n", start) % (len(text) + 1)
    new = {
        "delete": "",
        "duplicate": tok.text + " " + tok.text,
        "replace": f" {WORDS[pick % len(WORDS)]} ",
        "int": INTS[pick % len(INTS)],
        "layer": LAYER_NAMES[pick % len(LAYER_NAMES)],
        "dtype": DTYPES[pick % len(DTYPES)],
        "drop_import": "",
    }.get(kind)
    if new is None:  # swap with another token
        other = toks[pick % len(toks)]
        if other.offset <= start:
            return text
        return (
            text[:start]
            + other.text
            + text[end : other.offset]
            + tok.text
            + text[other.offset + len(other.text) :]
        )
    return text[:start] + new + text[end:]


edits = st.lists(
    st.tuples(st.sampled_from(EDITS), st.integers(0, 10**6), st.integers(0, 10**6)),
    min_size=1,
    max_size=4,
)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("zoo")
    write_project(root, ZOO_TEXT)
    return root


def check_mutated(zoo: Path, path: str, changes) -> None:
    text = ZOO_TEXT[path]
    for kind, at, pick in changes:
        text = edit(text, kind, at, pick)
    (zoo / path).write_text(text)
    try:
        entries = (path,) + IMPORTERS.get(path, ())
        front_end(zoo, entries, [t for t in TARGETS if t[0] in entries])
    finally:
        (zoo / path).write_text(ZOO_TEXT[path])


@FAST
@given(path=st.sampled_from(ZOO), changes=edits)
def test_mutated_zoo(zoo, path, changes):
    check_mutated(zoo, path, changes)


@pytest.mark.slow
@SLOW
@given(path=st.sampled_from(ZOO), changes=edits)
def test_mutated_zoo_long(zoo, path, changes):
    check_mutated(zoo, path, changes)


# -- generated programs -----------------------------------------------------------------

shapes = st.lists(st.sampled_from((0, 1, 2, 3, 8, 16)), min_size=1, max_size=4).map(tuple)
int_args = st.lists(st.sampled_from((0, 1, -1, 3, 8, 10**9)), max_size=4)


def check_program(tmp_path: Path, program, args, shape, layer_pick: int) -> None:
    text, layers = program
    entries = write_project(tmp_path, {"gen.tri": text})
    targets = []
    if layers:
        name, count = layers[layer_pick % len(layers)]
        named = tuple((f"p{n}", v) for n, v in enumerate(args[:count]))
        targets.append(("gen.tri", name, named, shape))
    front_end(tmp_path, entries, targets)


@FAST
@given(program=programs(), args=int_args, shape=shapes, layer_pick=st.integers(0, 3))
def test_generated_programs(tmp_path, program, args, shape, layer_pick):
    check_program(tmp_path, program, args, shape, layer_pick)


@pytest.mark.slow
@SLOW
@given(program=programs(), args=int_args, shape=shapes, layer_pick=st.integers(0, 3))
def test_generated_programs_long(tmp_path, program, args, shape, layer_pick):
    check_program(tmp_path, program, args, shape, layer_pick)


# -- adversarial inputs -------------------------------------------------------------------

BLOCK = """layer Block{n}(cin: int = 8, cout: int = 16) {{
    let conv = TernaryConv2d(cin, cout, kernel=3, padding=1)
    let bn = BatchNorm2d(cout)
    let fc = TernaryLinear(cout, 10)
    fn forward(x: Tensor<float32, [N, cin, H, W]>) -> Tensor<float32, [N, 10]> {{
        return fc(flatten(adaptive_avg_pool2d(relu(bn(conv(x))), 1), 1))
    }}
}}
"""
FORWARD = "fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {{ {body} }}"


def _layer(params: str, members: str, body: str = "return x") -> str:
    return f"layer A({params}) {{\n{members}\n{FORWARD.format(body=body)}\n}}\n"


def _valid_items(kbytes: int) -> str:
    out, size, n = [], 0, 0
    while size < kbytes * 1024:
        out.append(BLOCK.format(n=n))
        size, n = size + len(out[-1]), n + 1
    return "\n".join(out)


ADVERSARIAL = {
    # name: (file text, codes it must report among others: parser recovery may add cascades)
    "parentheses 500 deep": (lambda: "let a = " + "(" * 500 + "1" + ")" * 500 + "\n", {"E0107"}),
    "lists 500 deep": (lambda: "let a = " + "[" * 500 + "1" + "]" * 500 + "\n", {"E0107"}),
    "unary minus 2000 deep": (lambda: "let a = " + "-" * 2000 + "1\n", {"E0107"}),
    "conditionals 500 deep": (lambda: "let a = " + "true ? 1 : " * 500 + "2\n", {"E0107"}),
    "dims 500 deep": (
        lambda: "fn f(x: Tensor<float32, [" + "(" * 500 + "H" + ")" * 500 + "]>) {}\n",
        {"E0107"},
    ),
    "blocks 300 deep": (
        lambda: _layer("", "let m = ReLU()", "if true { " * 300 + "}" * 300 + " return x"),
        {"E0107"},
    ),
    "comprehension 0..10**12": (lambda: "let a = [i for i in 0..1000000000000]\n", {"E0504"}),
    "Sequential of 10**12 layers": (
        lambda: _layer(
            "n: int = 1000000000000", "let m = Sequential([ReLU() for i in 0..n])", "return m(x)"
        ),
        {"E0504"},
    ),
    "forward loop over 0..10**12": (
        lambda: _layer("", "let m = ReLU()", "for i in 0..1000000000000 { x = m(x) }\n return x"),
        {"E0504"},
    ),
    "list of 10**6 lists": (lambda: "let a = [[i, i] for i in 0..1000000]\n", {"E0504"}),
    "division by zero in dims": (
        lambda: (
            "fn f(x: Tensor<float32, [N / 0, N % 0]>) -> Tensor<float32, [N]> "
            "{ return reshape(x, [N / (2 - 2)]) }\nlet k = 4 % (1 - 1)\n"
        ),
        {"E0502"},
    ),
    "negative dims": (
        lambda: _layer(
            "c: int = -5",
            "let m = TernaryLinear(c, -1)\nlet p = MaxPool2d(kernel=-2)",
            "let y: Tensor<float32, [-3, N]> = x\n return reshape(m(x), [-2, 4])",
        ),
        {"E0401"},
    ),
    "conv output of size 0": (
        lambda: (
            "layer C() {\nlet c = TernaryConv2d(3, 8, kernel=3)\n"
            "fn forward(x: Tensor<float32, [N, 3, 1, 1]>) { return c(x) }\n}\n"
        ),
        {"E0408"},
    ),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial(tmp_path, name):
    make, expected = ADVERSARIAL[name]
    entries = write_project(tmp_path, {"adv.tri": make()})
    assert expected <= {d.code for d in front_end(tmp_path, entries)}


@pytest.mark.parametrize("kbytes", [100, pytest.param(1024, marks=pytest.mark.slow)])
def test_large_file_of_valid_items(tmp_path, kbytes):
    entries = write_project(tmp_path, {"big.tri": _valid_items(kbytes)})
    assert front_end(tmp_path, entries) == []


# -- regressions ---------------------------------------------------------------------------


def _regression(path: Path):
    text = path.read_text()
    xfail = re.search(r"^# xfail: (.*)$", text, re.M)
    marks = [pytest.mark.xfail(reason=xfail.group(1), strict=True)] if xfail else []
    return pytest.param(path, marks=marks, id=path.stem)


@pytest.mark.parametrize("path", [_regression(p) for p in sorted(REGRESSIONS.glob("*.tri"))])
def test_regression(tmp_path, path):
    """A fixed crash stays fixed: the file checks without an exception and reports exactly its
    ``# expect:`` codes (``any``: at least one diagnostic). A known bug (``# xfail:``) runs under a
    short hang guard."""
    text = path.read_text()
    expect = re.search(r"^# expect:(.*)$", text, re.M).group(1).split()
    entries = write_project(tmp_path, {"case.tri": text})
    codes = {
        d.code
        for d in front_end(tmp_path, entries, seconds=5 if "# xfail:" in text else HANG_SECONDS)
    }
    assert codes != set() if expect == ["any"] else codes == set(expect)
