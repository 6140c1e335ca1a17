"""The VS Code extension's TextMate grammar, run under node with the npm packages VS Code
uses (vscode-textmate, vscode-oniguruma): over the zoo and the examples, every keyword,
type name, dim, number, string and comment the compiler's lexer finds gets its scope.

The npm packages are installed by ``make test`` (``editors/vscode/node_modules``); without
them, or without node, the test is skipped, unless ``TRIBUILD_REQUIRE_NODE`` is set (CI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.tokens import KEYWORDS

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "editors" / "vscode"
SOURCES = sorted((REPO / "models").rglob("*.tri")) + sorted((REPO / "examples").rglob("*.tri"))
SCALARS = {
    "trit",
    "bool",
    "int8",
    "int32",
    "int64",
    "int",
    "float16",
    "bfloat16",
    "float32",
    "float",
}
TENSORS = {"Tensor", "TernaryTensor", "tensor"}


def _expected_scope(kind: str, text: str, in_dims: bool) -> str | None:
    """The scope (a prefix) the grammar must give a token of the lexer."""
    if kind in ("true", "false"):
        return "constant.language.boolean"
    if kind in ("layer", "fn", "let"):
        return "storage.type"
    if kind in KEYWORDS:
        return "keyword.control"
    if kind in ("int", "float"):
        return "constant.numeric"
    if kind == "string":
        return "string.quoted.double"
    if kind == "ident" and text in SCALARS:
        return "support.type.primitive"
    if kind == "ident" and text in TENSORS:
        return "support.type.tensor"
    if kind == "ident" and in_dims:
        return "variable.other.dim"
    return None


@pytest.fixture(scope="module")
def tokenized() -> dict:
    if shutil.which("node") is None or not (EXTENSION / "node_modules").is_dir():
        if os.environ.get("TRIBUILD_REQUIRE_NODE"):
            pytest.fail(
                "node and editors/vscode/node_modules are required (make test installs them)"
            )
        pytest.skip("needs node and `npm ci` in editors/vscode (make test does it)")
    done = subprocess.run(
        ["node", "test/tokenize.mjs", *map(str, SOURCES)],
        cwd=EXTENSION,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def _scopes_at(tokens: list, line: int, column: int) -> list[str]:
    for n, start, end, scopes in tokens:
        if n == line and start <= column < end:
            return scopes
    return []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_scopes_follow_the_lexer(tokenized, path: Path):
    text = path.read_text()
    tokens = tokenized[str(path)]
    lexed = lex(text)
    checked = 0
    angle = square = 0  # inside `Tensor<...>`, and the `[` depth there
    for i, tok in enumerate(lexed):
        if tok.kind == "<" and i > 0 and lexed[i - 1].text in TENSORS:
            angle += 1
        elif tok.kind == ">" and angle and not square:
            angle -= 1
        elif tok.kind == "[" and angle:
            square += 1
        elif tok.kind == "]" and angle:
            square -= 1
        expected = _expected_scope(tok.kind, tok.text, angle > 0 and square > 0)
        if expected is None:
            continue
        line = text.count("\n", 0, tok.offset)
        column = tok.offset - (text.rfind("\n", 0, tok.offset) + 1)
        scopes = _scopes_at(tokens, line, column)
        assert any(s.startswith(expected) for s in scopes), (line + 1, tok.text, scopes)
        checked += 1
    assert checked > 10
    # comments: what lies between the lexer's tokens and starts with # or /*
    ends = [0] + [t.offset + len(t.text) for t in lexed]
    starts = [t.offset for t in lexed] + [len(text)]
    comments = 0
    for gap_start, gap_end in zip(ends, starts, strict=True):
        gap = text[gap_start:gap_end]
        for mark in ("#", "/*"):
            at = gap.find(mark)
            if at >= 0 and not gap[:at].count("#"):
                offset = gap_start + at
                line = text.count("\n", 0, offset)
                column = offset - (text.rfind("\n", 0, offset) + 1)
                scopes = _scopes_at(tokens, line, column)
                assert any(s.startswith("comment.") for s in scopes), (line + 1, scopes)
                comments += 1
    assert comments > 0 or "#" not in text


def test_declared_names(tokenized):
    """The names a declaration introduces: a layer's, a function's."""
    path = REPO / "models" / "blocks" / "resnet_blocks.tri"
    tokens = tokenized[str(path)]
    lines = path.read_text().split("\n")
    n = next(i for i, line in enumerate(lines) if line.startswith("layer BasicBlock"))
    assert "entity.name.type.layer.tri" in _scopes_at(tokens, n, len("layer "))
    n = next(i for i, line in enumerate(lines) if "fn forward" in line)
    assert "entity.name.function.tri" in _scopes_at(tokens, n, lines[n].index("forward"))
