"""Diagnostics over the protocol: published on open and on change, with the final text's
diagnostics only after a burst, across files, for deleted and undecodable files."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import TIMEOUT, diagnostics_until, open_file, replace_all

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


async def test_burst_ends_with_the_final_text(client: LanguageClient):
    """50 keystroke changes, each naming a different unknown name: what is published last
    is the final text's one diagnostic, for the final version, and nothing follows it."""
    path = client.zoo / "models" / "mlp.tri"
    text = path.read_text()
    uri = open_file(client, path)
    await diagnostics_until(client, uri, lambda d: d == [])
    before = len(client.published)
    for i in range(50):
        replace_all(client, uri, text.replace("return fc3(h)", f"return fc3(h) + zz{i}"), i + 2)
    found = await diagnostics_until(client, uri, lambda d: any("zz49" in x.message for x in d))
    assert [d.code for d in found] == ["E0307"]
    await asyncio.sleep(0.5)  # 25 debounces: any late publication would have come
    mine = [p for p in client.published[before:] if p.uri == uri]
    assert mine[-1].version == 51
    assert [d.message.split("\n")[0] for d in mine[-1].diagnostics] == ["unknown name `zz49`"]
    assert len(mine) < 50  # debounced: not one check per keystroke


async def test_instance_error_has_its_chain(client: LanguageClient):
    """An error only some instances have: reported where it is, with related locations for
    each level of the chain that built the instance."""
    path = client.zoo / "models" / "blocks" / "resnet_blocks.tri"
    text = path.read_text()
    uri = open_file(client, path)
    conv1 = "let conv1 = TernaryConv2d(cin, width, kernel=3, stride=stride, padding=1)"
    broken = text.replace(conv1, conv1[:-1] + ", groups=3)", 1)
    assert broken != text
    replace_all(client, uri, broken, 2)
    found = await diagnostics_until(client, uri, lambda d: len(d) > 0)
    first = found[0]
    assert first.code == "E0407"
    assert "in ResNet.layer1.blocks[0] (BasicBlock cin=64 width=64 stride=1)" in first.message
    related = [(r.location.uri, r.message) for r in first.related_information]
    resnet = (client.zoo / "models" / "resnet.tri").as_uri()
    assert related[0][0] == resnet and "as `layer1` of ResNet" in related[0][1]
    assert related[1][0] == uri and "as `blocks[0]` of ResStage" in related[1][1]
    line = broken.count("\n", 0, broken.index("let conv1"))
    assert {d.range.start.line for d in found} == {line}


async def test_deleted_and_renamed_while_open(client: LanguageClient):
    """A file deleted on disk while open keeps the editor's text; once closed, its importers
    report it missing. A file renamed while open moves its diagnostics to the new name."""
    models = client.zoo / "models"
    blocks = models / "blocks" / "conv_bn_act.tri"
    blocks_uri = open_file(client, blocks)
    blocks.unlink()
    watched(client, (blocks_uri, lsp.FileChangeType.Deleted))
    resnet = (models / "resnet.tri").as_uri()
    await asyncio.sleep(0.3)
    assert client.diagnostics.get(resnet, []) == []
    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(blocks_uri))
    )
    found = await diagnostics_until(client, resnet, lambda d: len(d) > 0)
    assert [d.code for d in found] == ["E0204"]
    assert "cannot read imported file `models/blocks/conv_bn_act.tri`" in found[0].message

    mlp = models / "mlp.tri"
    text = mlp.read_text()
    broken = text.replace("relu(", "rleu(", 1)
    old = open_file(client, mlp)
    replace_all(client, old, broken, 2)
    await diagnostics_until(client, old, lambda d: len(d) == 1)
    new_path = models / "mlp2.tri"
    new_path.write_text(broken)
    mlp.unlink()
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(old)))
    new = open_file(client, new_path)
    watched(client, (old, lsp.FileChangeType.Deleted), (new, lsp.FileChangeType.Created))
    assert await diagnostics_until(client, old, lambda d: d == []) == []
    moved = await diagnostics_until(client, new, lambda d: len(d) == 1)
    assert moved[0].code == "E0307"
    # the target whose entry file went away is reported, and the server goes on
    await asyncio.wait_for(_logged(client, "target `mnist_mlp` cannot be built"), TIMEOUT)


async def test_file_that_is_not_utf8(client: LanguageClient):
    """Undecodable bytes on disk are a diagnostic where the file is read and where it is
    imported; once the editor opens it (having decoded it its own way), its text counts."""
    models = client.zoo / "models"
    latin = models / "latin.tri"
    latin.write_bytes(b"# caf\xe9\nlet SCALE: int = 2\n")
    user = models / "uses_latin.tri"
    user.write_text('from "latin.tri" import SCALE\nlet TWICE: int = SCALE * 2\n')
    watched(
        client,
        (latin.as_uri(), lsp.FileChangeType.Created),
        (user.as_uri(), lsp.FileChangeType.Created),
    )
    user_uri = open_file(client, user)
    found = await diagnostics_until(client, user_uri, lambda d: len(d) > 0)
    assert [d.code for d in found] == ["E0204"]
    assert "not valid UTF-8: byte 0xe9 at line 1, column 6" in found[0].message
    on_disk = await diagnostics_until(client, latin.as_uri(), lambda d: len(d) > 0)
    assert [d.code for d in on_disk] == ["E0001"]
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(
                uri=latin.as_uri(),
                language_id="tri",
                version=1,
                text=latin.read_bytes().decode("latin-1"),
            )
        )
    )
    assert await diagnostics_until(client, user_uri, lambda d: d == []) == []
    assert await diagnostics_until(client, latin.as_uri(), lambda d: d == []) == []


async def test_columns_count_utf16_units(client: LanguageClient):
    """Characters beyond the Basic Multilingual Plane count two UTF-16 units (the protocol's
    default encoding)."""
    path = client.zoo / "models" / "mlp.tri"
    text = path.read_text().replace(
        "return fc3(h)", "return fc3(h) /* \U0001f600\U0001f600 */ + qq"
    )
    uri = open_file(client, path)
    replace_all(client, uri, text, 2)
    found = await diagnostics_until(client, uri, lambda d: len(d) > 0)
    line = text.split("\n")[found[0].range.start.line]
    at = line.index("qq")
    assert found[0].range.start.character == at + 2  # two astral characters before it
    assert found[0].range.end.character == at + 4


def watched(client: LanguageClient, *changes: tuple[str, lsp.FileChangeType]) -> None:
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(
            changes=[lsp.FileEvent(uri=uri, type=kind) for uri, kind in changes]
        )
    )


async def _logged(client: LanguageClient, text: str) -> None:
    while not any(text in m.message for m in client.log_messages):
        await client.wait_for_notification(lsp.WINDOW_LOG_MESSAGE)


async def test_an_open_document_over_the_size_limit_is_e0001_as_in_check(client: LanguageClient):
    """A 6 MB document showed as clean while `tribuild check` reported E0001 for the file on
    disk (the 4 MiB limit); the editor's text gets the same limit and the same message."""
    from tribuild.driver.sources import MAX_BYTES

    path = client.zoo / "models" / "big.tri"
    text = "let SCALE: int = 2\n" + ("# " + "x" * 98 + "\n") * (6_000_000 // 101)
    assert len(text.encode()) > MAX_BYTES
    path.write_text(text)
    uri = open_file(client, path)
    found = await diagnostics_until(client, uri, lambda d: len(d) > 0)
    assert [d.code for d in found] == ["E0001"]
    assert f"is {len(text.encode())} bytes, more than the limit of {MAX_BYTES}" in found[0].message
    replace_all(client, uri, "let SCALE: int = 2\n", 2)
    assert await diagnostics_until(client, uri, lambda d: d == []) == []


async def test_what_codegen_refuses_in_a_file_no_target_reaches(client: LanguageClient):
    """Issue 37: a new file no target builds applies a layer it builds in `forward`; the
    server publishes `check`'s E0601 at the `let`, not nothing."""
    path = client.zoo / "models" / "extra.tri"
    path.write_text(
        "layer X(hidden: int = 32) {\n    let fc = Linear(10, hidden)\n"
        "    fn forward(x: Tensor<float32, [N, 10]>) -> Tensor<float32, [N, 10]> {\n"
        "        let extra = Linear(hidden, 10)\n        return extra(fc(x))\n    }\n}\n"
    )
    uri = open_file(client, path)
    found = await diagnostics_until(client, uri, lambda d: len(d) > 0)
    assert [d.code for d in found] == ["E0601"]
    assert found[0].range.start.line == 3
