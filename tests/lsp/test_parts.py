"""The language server's parts that need no client: positions in each encoding, the built-ins'
lines, and a handler's internal error logged through ``window/logMessage``."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from tribuild.lang.builtins.docs import SUMMARIES
from tribuild.lang.builtins.functions import FUNCTIONS
from tribuild.lang.builtins.layers import LAYERS
from tribuild.lsp.positions import to_offset, to_position
from tribuild.lsp.server import TriServer

TEXT = "ab\n\U0001f600x é\n\nlast"

# (offset in code points, utf-16, utf-8, utf-32): each as (line, character)
POSITIONS = [
    (0, (0, 0), (0, 0), (0, 0)),
    (2, (0, 2), (0, 2), (0, 2)),
    (3, (1, 0), (1, 0), (1, 0)),
    (4, (1, 2), (1, 4), (1, 1)),  # after the emoji: 2 UTF-16 units, 4 bytes, 1 code point
    (6, (1, 4), (1, 6), (1, 3)),  # before é
    (7, (1, 5), (1, 8), (1, 4)),  # after é: 1 unit, 2 bytes
    (9, (3, 0), (3, 0), (3, 0)),
    (13, (3, 4), (3, 4), (3, 4)),
]


@pytest.mark.parametrize("offset,utf16,utf8,utf32", POSITIONS)
def test_positions_round_trip(offset, utf16, utf8, utf32):
    for encoding, expected in (("utf-16", utf16), ("utf-8", utf8), ("utf-32", utf32)):
        assert to_position(TEXT, offset, encoding) == expected
        assert to_offset(TEXT, *expected, encoding) == offset


def test_positions_past_the_end_are_clamped():
    assert to_offset(TEXT, 0, 99) == 2  # the end of line 0
    assert to_offset(TEXT, 99, 0) == len(TEXT)
    assert to_position(TEXT, 999) == (3, 4)


def test_every_builtin_has_a_line():
    assert set(SUMMARIES) == set(LAYERS) | set(FUNCTIONS)


def test_internal_error_is_logged_and_fails_alone():
    server = TriServer()
    logged: list[lsp.LogMessageParams] = []
    server.ls.window_log_message = logged.append  # what the client would receive

    @server.guard("testing")
    def broken(params):
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError):
        broken(None)
    assert logged[0].type == lsp.MessageType.Error
    assert "internal error while testing" in logged[0].message
    assert "ZeroDivisionError: boom" in logged[0].message


def test_a_bad_tribuild_toml_leaves_a_project_without_config(tmp_path):
    """Editing goes on in a folder whose Tribuild.toml does not parse: the folder is a project
    without one, and the problem is kept to be shown (this raised AttributeError once)."""
    from tribuild.lsp.state import discover
    from tribuild.project import DEFAULT_CACHE_DIR

    (tmp_path / "Tribuild.toml").write_text("[project\nname = ")
    project, problem = discover(str(tmp_path))
    assert project.config is None and project.root == str(tmp_path)
    assert project.cache_dir == str(tmp_path / DEFAULT_CACHE_DIR)
    assert problem is not None and "Tribuild.toml:1:" in problem
