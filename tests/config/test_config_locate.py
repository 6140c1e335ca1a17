"""The TOML locator: positions of keys and values, on a tricky fixture and on generated TOML."""

from __future__ import annotations

import json
import random
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.config.locate import Locator

TRICKY = Path(__file__).resolve().parents[1] / "fixtures" / "config" / "locator" / "tricky.toml"


def text_at(text: str, position: tuple[int, int]) -> str:
    line, column = position
    return text.splitlines()[line - 1][column - 1 :]


# (key path, "key" or "value", what the text at that position starts with)
TRICKY_CASES = [
    (("title",), "key", "title ="),
    (("title",), "value", '"a # not a comment"'),
    (("quoted key",), "key", '"quoted key"'),
    (("quoted key",), "value", "'literal"),
    (("site",), "key", "site."),
    (("site", "google.com"), "key", '"google.com".rank'),
    (("site", "google.com", "rank"), "value", "1"),
    (("when",), "value", "1979-05-27 07:32:00"),
    (("text",), "value", '"""'),
    (("raw",), "key", "raw = '''"),
    (("servers",), "key", "servers.alpha]"),
    (("servers", "alpha"), "key", "alpha]"),
    (("servers", "alpha"), "value", "[servers.alpha]"),
    (("servers", "alpha", "ip"), "value", '"10.0.0.1"'),
    (("servers", "alpha", "ports", 1), "value", "8001,"),
    (("servers", "alpha", "ports", 2, 1, "k"), "value", '"v" }'),
    (("servers", "alpha", "meta", "a", "b"), "key", "b = 1"),
    (("servers", "alpha", "meta", "c d", 1), "value", "2]"),
    (("servers", "beta"), "key", '"beta" ]'),
    (("servers", "beta", "ip"), "value", '"10.0.0.2"'),
    (("fruits", 0, "name"), "value", '"apple"'),
    (("fruits", 0, "physical", "colour"), "value", '"red"'),
    (("fruits", 1), "value", "[[fruits]]"),
    (("fruits", 1, "name"), "value", '"banana"'),
    # not in the file: the nearest recorded ancestor, then the file's start
    (("servers", "alpha", "missing"), "key", "alpha]"),
    (("nowhere", "at", "all"), "value", "# A comment"),
]


@pytest.mark.parametrize(("path", "kind", "start"), TRICKY_CASES)
def test_tricky_positions(path: tuple, kind: str, start: str) -> None:
    text = TRICKY.read_text(encoding="utf-8")
    tomllib.loads(text)  # the fixture itself must be valid TOML
    locator = Locator(text)
    assert text_at(text, getattr(locator, kind)(path)).startswith(start)


# -- generated documents: every key and value is found where the emitter wrote it --

KEYS = st.text(alphabet="abZ09_- .'\"#é", min_size=1, max_size=5)
SCALARS = st.one_of(
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="ab \"'#,]}[{\\\n=.", max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


class Emitter:
    """Writes a document as TOML in randomly chosen styles, noting the offset of each part."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.out = ""
        self.keys: dict[tuple, int] = {}  # first mention, as the locator promises
        self.values: dict[tuple, int] = {}

    def write(self, text: str, path: tuple | None = None, marks: dict | None = None) -> None:
        if marks is not None:
            marks.setdefault(path, len(self.out))
        self.out += text

    def key_parts(self, base: tuple, parts: tuple) -> None:
        for i, part in enumerate(parts):
            if i:
                self.write(self.rng.choice([".", " . "]))
            bare = re.fullmatch(r"[A-Za-z0-9_-]+", part)
            self.write(
                part if bare else json.dumps(part, ensure_ascii=False),
                base + parts[: i + 1],
                self.keys,
            )

    def table_body(self, path: tuple, table: dict) -> None:
        headers = []
        for name, value in table.items():
            if isinstance(value, dict) and self.rng.random() < 0.4:
                headers.append((path + (name,), value))
            else:
                self.assign(path, (name,), value)
        for header, value in headers:
            self.write("[", header, self.values)
            self.key_parts((), header)
            self.write("]  # [{ not a table\n")
            self.table_body(header, value)

    def assign(self, table: tuple, dotted: tuple, value: object) -> None:
        if isinstance(value, dict) and value and self.rng.random() < 0.5:
            for name, inner in value.items():
                self.assign(table, dotted + (name,), inner)
            return
        self.key_parts(table, dotted)
        self.write(" = ")
        self.value(table + dotted, value)
        self.write(self.rng.choice(["\n", "  # = [ {\n"]))

    def value(self, path: tuple, value: object) -> None:
        self.values[path] = len(self.out)
        if isinstance(value, list):
            self.write("[")
            for index, item in enumerate(value):
                self.write(self.rng.choice(["", " ", "\n  # ] }\n  "]))
                self.value(path + (index,), item)
                self.write(",")
            self.write("]")
        elif isinstance(value, dict):
            self.write("{")
            for index, (name, item) in enumerate(value.items()):
                self.write(", " if index else " ")
                self.key_parts(path, (name,))
                self.write(" = ")
                self.value(path + (name,), item)
            self.write(" }")
        elif isinstance(value, str):
            self.write(self.string(value))
        else:
            self.write(str(value).lower() if isinstance(value, bool) else repr(value))

    def string(self, value: str) -> str:
        style = self.rng.choice(["basic", "literal", "multiline"])
        if style == "literal" and "'" not in value and "\n" not in value:
            return f"'{value}'"
        if style == "multiline":
            body = "".join(c if c == "\n" else json.dumps(c)[1:-1] for c in value)
            return f'"""\n{body}"""'
        return json.dumps(value, ensure_ascii=False)


def position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=4), st.randoms(use_true_random=False))
def test_generated_documents(document: dict, rng: random.Random) -> None:
    emitter = Emitter(rng)
    emitter.table_body((), document)
    text = emitter.out
    assert tomllib.loads(text) == document  # the emitter wrote what it meant to
    locator = Locator(text)
    for path, offset in emitter.keys.items():
        assert locator.key(path) == position(text, offset), (path, text)
    for path, offset in emitter.values.items():
        assert locator.value(path) == position(text, offset), (path, text)
