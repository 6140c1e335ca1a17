"""Hover, go to definition, find references and the outline, over the protocol, on a copy of
the zoo. Each case names a place by a snippet of its file's text."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import position_of, show

pytestmark = pytest.mark.asyncio(loop_scope="module")

# (file, snippet, offset into it, what the hover must say)
HOVERS = [
    # a local in forward: its concrete shape in each target's instance (input substituted)
    ("resnet.tri", "x = stem(x)", 0, ["x: Tensor<float32, [N, 64,", "[1, 64, 56, 56]", "resnet18"]),
    ("resnet.tri", "x = layer4", 0, ["[1, 512, 7, 7]", "[1, 2048, 7, 7]", "resnet152"]),
    # a member: the layer it holds, per instance
    ("resnet.tri", "fc(flatten", 0, ["Linear(in_features=512, out_features=1000", "resnet18"]),
    # a construction parameter: as declared, then its value per instance
    ("resnet.tri", "bottleneck ? 4", 0, ["bottleneck: bool = false", "`true` in `ResNet"]),
    # a user layer imported from another file: header, doc comment, instances
    ("resnet.tri", "ResStage(64", 0, ["layer ResStage(cin: int", "One stage", "resnet34"]),
    # built-ins: parameters and their line
    (
        "resnet.tri",
        "Linear(bottleneck",
        0,
        ["Linear(in_features: int, out_features: int", "full-precision"],
    ),
    ("resnet.tri", "flatten(", 0, ["flatten(x, start_dim = 0)", "multiplies the dims"]),
    # a keyword argument: the callee's parameter
    ("resnet.tri", "kernel=7", 0, ["layer ConvBNAct(", "parameter `kernel`"]),
    # a constant
    ("resnet.tri", "ACT_RELU,", 0, ["let ACT_RELU"]),
    # an import's file
    ("resnet.tri", '"blocks/resnet_blocks.tri"', 2, ["`models/blocks/resnet_blocks.tri`"]),
]

# (file, snippet, offset, file defined in, snippet of the definition)
DEFINITIONS = [
    ("resnet.tri", "ResStage(64", 0, "blocks/resnet_blocks.tri", "ResStage("),
    ("resnet.tri", "ACT_RELU,", 0, "blocks/conv_bn_act.tri", "ACT_RELU:"),
    ("resnet.tri", "x = stem", 0, "resnet.tri", "x: Tensor"),
    ("resnet.tri", "stem(x)", 0, "resnet.tri", "stem ="),
    ("resnet.tri", "blocks[0]", 0, "resnet.tri", "blocks: [int]"),
    ("resnet.tri", "kernel=7", 0, "blocks/conv_bn_act.tri", "kernel: int"),
    ("resnet.tri", "import ResStage", 7, "blocks/resnet_blocks.tri", "ResStage("),
]


@pytest.mark.parametrize("name,snippet,delta,expected", HOVERS)
async def test_hover(shared: LanguageClient, name, snippet, delta, expected):
    path = shared.zoo / "models" / name
    uri = show(shared, path)
    result = await shared.text_document_hover_async(
        lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), position_of(path.read_text(), snippet, delta=delta)
        )
    )
    assert result is not None
    for part in expected:
        assert part in result.contents.value


@pytest.mark.parametrize("name,snippet,delta,target,defined", DEFINITIONS)
async def test_definition(shared: LanguageClient, name, snippet, delta, target, defined):
    path = shared.zoo / "models" / name
    uri = show(shared, path)
    found = await shared.text_document_definition_async(
        lsp.DefinitionParams(
            lsp.TextDocumentIdentifier(uri), position_of(path.read_text(), snippet, delta=delta)
        )
    )
    target_path = shared.zoo / "models" / target
    assert [(f.uri, f.range.start) for f in found] == [
        (target_path.as_uri(), position_of(target_path.read_text(), defined))
    ]


async def test_references_across_files(shared: LanguageClient):
    """`ConvBNAct` is defined in one file and used in several: every use is found, its
    definition included, and nothing else (a local of the same name would not count)."""
    blocks = shared.zoo / "models" / "blocks" / "conv_bn_act.tri"
    uri = show(shared, blocks)
    found = await shared.text_document_references_async(
        lsp.ReferenceParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            position=position_of(blocks.read_text(), "layer ConvBNAct", delta=6),
            context=lsp.ReferenceContext(include_declaration=True),
        )
    )
    expected = set()
    for path in (shared.zoo / "models").rglob("*.tri"):
        text = path.read_text()
        at = text.find("ConvBNAct")
        while at >= 0:
            before = text[:at]
            if not before.rstrip().endswith("#") and "#" not in before[before.rfind("\n") :]:
                expected.add((path.as_uri(), text.count("\n", 0, at)))
            at = text.find("ConvBNAct", at + 1)
    assert {(f.uri, f.range.start.line) for f in found} == expected
    assert len(expected) > 5


async def test_document_symbols(shared: LanguageClient):
    path = shared.zoo / "models" / "resnet.tri"
    uri = show(shared, path)
    found = await shared.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
    )
    outline = [(s.name, s.kind) for s in found]
    assert outline == [
        ("blocks/conv_bn_act.tri", lsp.SymbolKind.Module),
        ("blocks/resnet_blocks.tri", lsp.SymbolKind.Module),
        ("ResNet", lsp.SymbolKind.Class),
    ]
    children = [(c.name, c.kind) for c in found[2].children]
    assert children == [
        ("stem", lsp.SymbolKind.Field),
        ("layer1", lsp.SymbolKind.Field),
        ("layer2", lsp.SymbolKind.Field),
        ("layer3", lsp.SymbolKind.Field),
        ("layer4", lsp.SymbolKind.Field),
        ("fc", lsp.SymbolKind.Field),
        ("forward", lsp.SymbolKind.Method),
    ]
    assert found[2].selection_range.start == position_of(path.read_text(), "ResNet(")
