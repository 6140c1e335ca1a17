"""Completion, signature help, rename and semantic tokens over the protocol, on copies of the
zoo; a server that survives bad requests; and one that writes nothing to disk."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import diagnostics_until, open_file, position_of, replace_all
from tribuild.driver.check import check
from tribuild.driver.session import Project

pytestmark = pytest.mark.asyncio


def apply(edit: lsp.WorkspaceEdit) -> None:
    """Write a workspace edit's changes to the files (as an editor would, then save)."""
    for uri, edits in edit.changes.items():
        path = Path(uri.removeprefix("file://"))
        text = path.read_text()
        lines = text.split("\n")
        starts = [0]
        for line in lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        for e in sorted(
            edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
        ):
            a = starts[e.range.start.line] + e.range.start.character
            b = starts[e.range.end.line] + e.range.end.character
            text = text[:a] + e.new_text + text[b:]
        path.write_text(text)


async def test_rename_across_files(client: LanguageClient):
    """Renaming a layer used in several files rewrites its definition, its imports and its
    uses, and the project still checks clean."""
    blocks = client.zoo / "models" / "blocks" / "conv_bn_act.tri"
    uri = open_file(client, blocks)
    position = position_of(blocks.read_text(), "layer ConvBNAct", delta=6)
    prepared = await client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(text_document=lsp.TextDocumentIdentifier(uri), position=position)
    )
    assert prepared.placeholder == "ConvBNAct"
    edit = await client.text_document_rename_async(
        lsp.RenameParams(
            text_document=lsp.TextDocumentIdentifier(uri), position=position, new_name="ConvNormAct"
        )
    )
    assert len(edit.changes) > 3
    before = _count(client.zoo, "ConvBNAct")
    apply(edit)
    assert sum(len(e) for e in edit.changes.values()) == before
    assert _count(client.zoo, "ConvBNAct") == 0
    result = check(Project.discover(str(client.zoo)))
    assert result.errors == 0


def _count(zoo: Path, word: str) -> int:
    """Occurrences of ``word`` outside comments."""
    total = 0
    for path in (zoo / "models").rglob("*.tri"):
        for line in path.read_text().split("\n"):
            total += line.split("#")[0].count(word)
    return total


async def test_bad_requests_fail_alone(client: LanguageClient):
    """A request about a file outside the project, a position past the end, or params the
    server cannot read: each fails or answers nothing, and the server goes on answering."""
    outside = client.zoo.parent / "elsewhere.tri"
    outside.write_text("layer L() {}\n")
    uri = open_file(client, outside)
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(0, 7))
    )
    assert hover is None
    path = client.zoo / "models" / "mlp.tri"
    mlp = open_file(client, path)
    far = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(mlp), lsp.Position(10_000, 10_000))
    )
    assert far is None
    bad = {
        "jsonrpc": "2.0",
        "id": "bad-1",
        "method": lsp.TEXT_DOCUMENT_HOVER,
        "params": {"textDocument": {"uri": mlp}, "position": "nowhere"},
    }
    for body in (json.dumps(bad).encode(), b"{not json at all"):
        sent = client.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        if inspect.isawaitable(sent):
            await sent
    text = path.read_text()
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(mlp), position_of(text, "fc3(h)"))
    )
    assert "Linear(in_features=128, out_features=10" in hover.contents.value
    replace_all(client, mlp, text.replace("relu(", "rleu(", 1), 2)
    assert len(await diagnostics_until(client, mlp, lambda d: len(d) > 0)) == 1


async def test_writes_nothing(client: LanguageClient):
    """Editing and asking leave no build output and no cache behind."""
    path = client.zoo / "models" / "resnet.tri"
    uri = open_file(client, path)
    text = path.read_text()
    replace_all(client, uri, text.replace("stem(x)", "stme(x)"), 2)
    await diagnostics_until(client, uri, lambda d: len(d) > 0)
    await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position_of(text, "x = stem"))
    )
    assert sorted(p.name for p in client.zoo.iterdir()) == ["Tribuild.toml", "models"]
