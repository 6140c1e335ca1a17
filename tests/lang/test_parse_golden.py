"""Golden tests of the parser over tests/fixtures/parse/*.tri.

Each NAME.tri has NAME.ast (a stable dump of every item's tree) and NAME.expected (every
diagnostic, rendered as text). Regenerate both with ``TRIBUILD_UPDATE_GOLDEN=1``.
"""

import os
from pathlib import Path

import pytest

from tribuild.base.record import fields, is_record
from tribuild.diagnostics import CODES
from tribuild.diagnostics_render import TextSources, render_text
from tribuild.lang.syntax.items import item_tokens
from tribuild.lang.syntax.locate import SourceMap
from tribuild.lang.syntax.parser import parse_item

FIXTURES = Path(__file__).parent.parent / "fixtures" / "parse"
CASES = sorted(FIXTURES.glob("*.tri"))
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def dump(node, indent: int = 0, label: str = "") -> list[str]:
    """One line per node: class and scalar fields; child nodes indented below."""
    pad, prefix = "  " * indent, f"{label}: " if label else ""
    if not is_record(node):
        return [f"{pad}{prefix}{node!r}"]
    scalars, children = [], []
    for name in fields(node):
        value = getattr(node, name)
        is_nodes = isinstance(value, tuple) and value and all(is_record(v) for v in value)
        if is_record(value) or is_nodes:
            children.append((name, value))
        else:
            scalars.append(f"{name}={value!r}")
    lines = [f"{pad}{prefix}{type(node).__name__} {' '.join(scalars)}".rstrip()]
    for name, value in children:
        if isinstance(value, tuple):
            lines.append(f"{pad}  {name}:")
            for child in value:
                lines += dump(child, indent + 2)
        else:
            lines += dump(value, indent + 1, name)
    return lines


def parse_file(path: Path) -> tuple[str, str]:
    """(tree dump, rendered diagnostics) of a fixture."""
    text = path.read_text()
    rel = f"parse/{path.name}"
    smap = SourceMap(text)
    sources = TextSources({rel: text})
    trees, rendered = [], []
    for entry in smap.items:
        node, diags = parse_item(item_tokens(smap.tokens, entry), rel, entry.id)
        trees.append(f"item {entry.id} ({entry.kind})")
        trees += dump(node, 1)
        rendered += [render_text(d, sources) for d in diags]
    return "\n".join(trees) + "\n", "\n".join(rendered)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_golden(case):
    tree, diags = parse_file(case)
    for suffix, got in ((".ast", tree), (".expected", diags)):
        golden = case.with_suffix(suffix)
        if UPDATE:
            golden.write_text(got)
        assert got == golden.read_text(), f"{golden.name} differs (TRIBUILD_UPDATE_GOLDEN=1)"


def test_good_programs_have_no_diagnostics():
    for case in CASES:
        if not case.stem.startswith(("e0", "recovery")):
            assert case.with_suffix(".expected").read_text() == "", case.name


def test_every_syntax_code_has_a_case():
    shown = "".join(c.with_suffix(".expected").read_text() for c in CASES)
    syntax = [code for code in CODES if code.startswith("E01")]
    assert syntax and all(f"[{code}]" in shown for code in syntax)
