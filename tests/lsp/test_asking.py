"""Completion, signature help, semantic tokens and refused renames over the protocol: what
only asks, on one server shared by the module."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import position_of, show

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def completion_labels(shared: LanguageClient, uri: str, position: lsp.Position) -> list:
    result = await shared.text_document_completion_async(
        lsp.CompletionParams(text_document=lsp.TextDocumentIdentifier(uri), position=position)
    )
    items = result.items if isinstance(result, lsp.CompletionList) else result
    return [i.label for i in items]


# (snippet the cursor goes after, text typed there, labels that must be offered, not offered)
COMPLETIONS = [
    # keyword arguments of the call the cursor is in, less those given (positionally before
    # it, by keyword after it: `ConvBNAct(3, 64, | kernel=7, stride=2, act=..., ternary=...)`)
    ("ConvBNAct(3, 64, ", "", ["groups="], ["cin=", "cout=", "kernel=", "act=", "ternary="]),
    ("ConvBNAct(3, 64, ", "gr", ["groups="], ["cin="]),
    # locals bound before the cursor, names in scope (imported), built-ins, keywords
    ("        x = stem(x)\n", "", ["x", "stem", "fc", "ResStage", "relu", "Linear", "return"], []),
    # import paths, relative to the file
    ('from "', "", ["blocks/resnet_blocks.tri", "vgg.tri"], ["resnet.tri"]),
    # the public names of an imported file
    ('from "blocks/resnet_blocks.tri" import ', "", ["BasicBlock", "Bottleneck", "ResStage"], []),
]


@pytest.mark.parametrize("after,typed,offered,absent", COMPLETIONS)
async def test_completion(shared: LanguageClient, after, typed, offered, absent):
    path = shared.zoo / "models" / "resnet.tri"
    text = path.read_text()
    at = text.index(after) + len(after)
    if 'from "' in after and after.endswith('"'):
        edited = text[:at] + '"\n' + text[at:]  # an import being written: `from "|"`
    else:
        edited = text[:at] + typed + text[at:]
    uri = show(shared, path, edited)
    shown = after + typed
    labels = await completion_labels(shared, uri, position_of(edited, shown, delta=len(shown)))
    for label in offered:
        assert label in labels
    for label in absent:
        assert label not in labels


async def test_signature_help(shared: LanguageClient):
    path = shared.zoo / "models" / "resnet.tri"
    text = path.read_text()
    uri = show(shared, path)
    help = await shared.text_document_signature_help_async(
        lsp.SignatureHelpParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            position=position_of(text, "kernel=7", delta=7),
        )
    )
    signature = help.signatures[0]
    assert signature.label.startswith("ConvBNAct(cin: int, cout: int, kernel: int = 3")
    start, end = signature.parameters[help.active_parameter].label
    assert signature.label[start:end] == "kernel: int = 3"
    help = await shared.text_document_signature_help_async(
        lsp.SignatureHelpParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            position=position_of(text, "Linear(bottleneck ? 2048 : 512, ", delta=33),
        )
    )
    start, end = help.signatures[0].parameters[help.active_parameter].label
    assert help.signatures[0].label[start:end] == "out_features: int"


# (file, snippet of the name, new name, what the refusal says)
REFUSALS = [
    ("blocks/resnet_blocks.tri", "layer ResStage", "BasicBlock", "already defined or imported"),
    ("blocks/resnet_blocks.tri", "layer ResStage", "relu", "is a built-in"),
    ("blocks/resnet_blocks.tri", "layer ResStage", "_Stage", "would be private"),
    ("blocks/resnet_blocks.tri", "layer ResStage", "for", "not a valid name"),
    ("resnet.tri", "let stem", "fc", "already used in `ResNet`"),
]


@pytest.mark.parametrize("name,snippet,new,why", REFUSALS)
async def test_rename_refused(shared: LanguageClient, name, snippet, new, why):
    path = shared.zoo / "models" / name
    uri = show(shared, path)
    with pytest.raises(Exception, match=why):
        await shared.text_document_rename_async(
            lsp.RenameParams(
                text_document=lsp.TextDocumentIdentifier(uri),
                position=position_of(path.read_text(), snippet, delta=len(snippet) - 2),
                new_name=new,
            )
        )


async def test_semantic_tokens(shared: LanguageClient):
    path = shared.zoo / "models" / "resnet.tri"
    text = path.read_text()
    uri = show(shared, path)
    result = await shared.text_document_semantic_tokens_full_async(
        lsp.SemanticTokensParams(text_document=lsp.TextDocumentIdentifier(uri))
    )
    types = shared.server_capabilities.semantic_tokens_provider.legend.token_types
    lines = text.split("\n")
    decoded = {}
    line = char = 0
    data = result.data
    for i in range(0, len(data), 5):
        line += data[i]
        char = data[i + 1] if data[i] else char + data[i + 1]
        decoded[lines[line][char : char + data[i + 2]], line] = types[data[i + 3]]
    where = text.count("\n", 0, text.index("layer ResNet"))
    assert decoded["layer", where] == "keyword"
    assert decoded["ResNet", where] == "class"
    assert decoded["blocks", where] == "parameter"
    assert decoded["int", where] == "type"
    assert decoded["2", where] == "number"
    at = text.count("\n", 0, text.index("let fc = Linear"))
    assert decoded["fc", at] == "property"
    assert decoded["Linear", at] == "class"
    at = text.count("\n", 0, text.index("return fc(flatten"))
    assert decoded["flatten", at] == "function"
    assert decoded["x", at] == "parameter"


async def test_formatting(shared: LanguageClient):
    path = shared.zoo / "models" / "mlp.tri"
    text = path.read_text()
    messy = "\n\n" + text.replace("\n    let fc2", "\n let fc2").replace(
        "        return", "  return"
    )
    uri = show(shared, path, messy)
    edits = await shared.text_document_formatting_async(
        lsp.DocumentFormattingParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            options=lsp.FormattingOptions(tab_size=4, insert_spaces=True),
        )
    )
    assert len(edits) == 1 and edits[0].new_text == text
    assert edits[0].range.start == lsp.Position(0, 0)
    assert edits[0].range.end == lsp.Position(line=messy.count("\n"), character=0)
    show(shared, path)
    again = await shared.text_document_formatting_async(
        lsp.DocumentFormattingParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            options=lsp.FormattingOptions(tab_size=4, insert_spaces=True),
        )
    )
    assert not again  # laid out already: no edit
