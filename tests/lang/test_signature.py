"""Signatures: equal across body and member edits, different across interface edits."""

from __future__ import annotations

import pytest

from tribuild.lang import dims
from tribuild.lang.signature import signature_of
from tribuild.lang.syntax.items import item_tokens, split_items
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.parser import parse_item
from tribuild.lang.types import ScalarT, TensorT

BASE = """layer Block(c: int, stride: int = 1) {
    let conv = TernaryConv2d(c, c, kernel=3, stride=stride, padding=1)
    fn forward(x: Tensor<float32, [N, c, H, W]>)
        -> Tensor<float32, [N, c, (H - 1) / stride + 1, ?]> {
        return conv(x)
    }
}
"""


def sig(text: str):
    tokens = lex(text)
    entry = split_items(tokens)[0]
    item, diags = parse_item(item_tokens(tokens, entry), "f.tri", entry.id)
    assert diags == ()
    return signature_of(item, "f.tri", entry.id)


def test_signature_contents():
    s, diags = sig(BASE)
    assert diags == ()
    assert (s.kind, s.name, [p.name for p in s.params]) == ("layer", "Block", ["c", "stride"])
    assert s.params[0].type == ScalarT("int64")
    x = s.inputs[0].type
    assert isinstance(x, TensorT) and x.dims[1] == dims.sym("c")
    assert s.ret.dims[2] == dims.add(
        dims.floordiv(dims.sub(dims.sym("H"), dims.const(1)), dims.sym("stride")), dims.const(1)
    )


@pytest.mark.parametrize(
    "edit",
    [
        (
            "    let conv = TernaryConv2d(c, c, kernel=3, stride=stride, padding=1)\n",
            "    let extra = ReLU()\n    let conv = TernaryConv2d(c, c, kernel=3, stride=stride, "
            "padding=1)\n",
        ),
        ("        return conv(x)\n", "        let y = conv(x)\n        return relu(y)\n"),
        (
            "layer Block(c: int, stride: int = 1) {",
            "layer Block(c: int, stride: int = 1) {  # a comment",
        ),
        ("[N, c, H, W]", "[N, c, H, W ]"),
    ],
)
def test_body_and_member_edits_keep_the_signature(edit):
    old, new = edit
    assert sig(BASE.replace(old, new))[0] == sig(BASE)[0]


@pytest.mark.parametrize(
    "edit",
    [
        ("stride: int = 1", "stride: int = 2"),
        ("c: int", "c: float"),
        ("-> Tensor<float32, [N, c,", "-> Tensor<float16, [N, c,"),
        ("x: Tensor<float32, [N, c, H, W]>", "x: Tensor<float32, [N, 2 * c, H, W]>"),
    ],
)
def test_interface_edits_change_the_signature(edit):
    old, new = edit
    assert sig(BASE.replace(old, new))[0] != sig(BASE)[0]


def test_equivalent_dim_spellings_give_equal_signatures():
    a = sig(BASE)[0]
    b = sig(BASE.replace("(H - 1) / stride + 1", "(H + 2*1 - 3) / stride + 1"))[0]
    assert a == b


def test_type_mistakes_are_reported():
    _, diags = sig(BASE.replace("Tensor<float32, [N, c, H, W]>", "Tensor<float64, [N, c, H, W]>"))
    assert [d.code for d in diags] == ["E0301"]
