"""The line wrapper's scanner against the plain definition: brackets and commas outside string
literals, a literal running from a quote to the first same quote not preceded by a backslash
(to the end of the text if there is none), depth counting the brackets open after each."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.codegen.fmt import _unquoted, wrap

TEXT = st.text(alphabet="'\"\\()[]{},ab =", max_size=60)


def reference(text: str, start: int) -> list[tuple[int, str, int]]:
    out, depth, quote = [], 0, None
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            quote = None if c == quote and text[i - 1] != "\\" else quote
        elif c in "'\"":
            quote = c
        elif c in "([{,)]}":
            depth += (c in "([{") - (c in ")]}")
            out.append((i, c, depth))
    return out


@settings(max_examples=examples(200), deadline=None)
@given(TEXT, st.integers(0, 60))
def test_the_scanner_finds_what_the_definition_says(text, start):
    start = min(start, len(text))
    assert list(_unquoted(text, start)) == reference(text, start)


def test_brackets_and_commas_inside_strings_do_not_split():
    line = 'self.x = f("a, (b", \'c]\', "d\\", e", ' + ", ".join(f"arg{i}" for i in range(20)) + ")"
    lines = wrap(line, "")
    assert lines[0] == "self.x = f("
    assert lines[1:4] == ['    "a, (b",', "    'c]',", '    "d\\", e",']
    assert lines[-1] == ")" and len(lines) == 25
