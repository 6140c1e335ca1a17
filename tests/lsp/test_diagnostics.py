"""Diagnostics over the protocol: published on open and on change, with the final text's
diagnostics only after a burst, across files, for deleted and undecodable files."""

from __future__ import annotations

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.conftest import diagnostics_until, open_file, replace_all

pytestmark = pytest.mark.asyncio


async def test_broken_edit_then_fix(client: LanguageClient):
    path = client.zoo / "models" / "mlp.tri"
    text = path.read_text()
    uri = open_file(client, path)
    await diagnostics_until(client, uri, lambda d: d == [])
    broken = text.replace("relu(", "rleu(", 1)
    replace_all(client, uri, broken, 2)
    found = await diagnostics_until(client, uri, lambda d: len(d) > 0)
    assert [d.code for d in found] == ["E0307"]
    assert "did you mean `relu`" in found[0].message
    line = broken.count("\n", 0, broken.index("rleu("))
    assert found[0].range.start.line == line
    replace_all(client, uri, text, 3)
    assert await diagnostics_until(client, uri, lambda d: d == []) == []
