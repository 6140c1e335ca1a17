"""The checker's API for the query layer: instance keys, instances and their children,
example inputs, and purity (equal inputs, equal results)."""

from __future__ import annotations

import pytest
from test_check_support import load_program, run_program

from tribuild.lang.check.checker import (
    check_instance,
    check_item,
    check_target_input,
    instance_key,
)
from tribuild.lang.check.env import ItemRef
from tribuild.lang.check.values import InstanceKey, LayerV, describe_instance
from tribuild.lang.signature import signature_of

BLOCKS = """
layer Block(cin: int, cout: int, stride: int = 1) {
    let conv = TernaryConv2d(cin, cout, kernel=3, stride=stride, padding=1)
    fn forward(x: Tensor<float32, [N, cin, H, W]>)
        -> Tensor<float32, [N, cout, (H - 1) / stride + 1, ?]> {
        return conv(x)
    }
}
"""
NET = """
from "blocks.tri" import Block
layer Net(widths: [int] = [8, 16], classes: int = 10) {
    let stages = Sequential([Block(i == 0 ? 3 : widths[i - 1], widths[i], 2) for i in 0..2])
    let fc = Linear(widths[1], classes)
    fn forward(x: Tensor<float32, [N, 3, 32, 32]>) -> Tensor<float32, [N, classes]> {
        return fc(flatten(adaptive_avg_pool2d(stages(x), 1), 1))
    }
}
"""


@pytest.fixture
def program():
    return load_program({"blocks.tri": BLOCKS, "net.tri": NET})


def ref(program, path, name):
    return program.env.scope_of(ItemRef(path, "", "")).lookup(name)


def test_instance_key_applies_defaults_and_normalises(program):
    r = ref(program, "blocks.tri", "Block")
    sig = program.env.signatures[r]
    key = instance_key(
        "blocks.tri", r.item_id, sig, {"cin": 64, "cout": 128}, program.env.scope_of(r)
    )
    assert key == InstanceKey(
        "blocks.tri", r.item_id, "Block", (("cin", 64), ("cout", 128), ("stride", 1))
    )
    assert key == instance_key("blocks.tri", r.item_id, sig, (64, 128, 1), program.env.scope_of(r))
    assert describe_instance(key) == "Block cin=64 cout=128 stride=1"
    net = ref(program, "net.tri", "Net")
    nkey = instance_key(
        "net.tri", net.item_id, program.env.signatures[net], {"widths": [4, 4]}, program.env
    )
    assert dict(nkey.args)["widths"] == (4, 4)
    with pytest.raises(ValueError, match="cout"):
        instance_key("blocks.tri", r.item_id, sig, {"cin": 64}, program.env.scope_of(r))
    with pytest.raises(
        ValueError,
        match=r"keyword `strid` is not a parameter of `Block` "
        r"\(did you mean `stride`\?\)",
    ):
        instance_key(
            "blocks.tri", r.item_id, sig, {"cin": 1, "cout": 2, "strid": 2}, program.env.scope_of(r)
        )


def test_instance_lists_children_and_members(program):
    net = ref(program, "net.tri", "Net")
    key = instance_key(
        "net.tri", net.item_id, program.env.signatures[net], {}, program.env.scope_of(net)
    )
    checked = check_instance(
        program.items[net], program.env.signatures[net], key, program.env.scope_of(net)
    )
    assert checked.diagnostics == ()
    assert [(p, describe_instance(k)) for p, k in checked.children] == [
        ("stages[0]", "Block cin=3 cout=8 stride=2"),
        ("stages[1]", "Block cin=8 cout=16 stride=2"),
    ]
    members = dict(checked.members)
    assert members["fc"] == LayerV(
        "Linear", (("in_features", 16), ("out_features", 10), ("bias", True))
    )
    assert str(checked.output) == "Tensor<float32, [N, 10]>"


def test_instance_finds_concrete_mismatch(program):
    net = ref(program, "net.tri", "Net")
    sig = program.env.signatures[net]
    key = instance_key("net.tri", net.item_id, sig, {"widths": [8, 16, 32]}, program.env)
    assert check_instance(program.items[net], sig, key, program.env.scope_of(net)).diagnostics == ()
    bad = instance_key("net.tri", net.item_id, sig, {"widths": [8]}, program.env)
    codes = [
        d.code
        for d in check_instance(program.items[net], sig, bad, program.env.scope_of(net)).diagnostics
    ]
    assert codes and set(codes) == {"E0503"}


def test_example_input(program):
    r = ref(program, "blocks.tri", "Block")
    sig = program.env.signatures[r]
    key = instance_key("blocks.tri", r.item_id, sig, {"cin": 3, "cout": 8}, program.env.scope_of(r))
    assert check_target_input(sig, key, (2, 3, 32, 32)) == ()
    (diag,) = check_target_input(sig, key, (2, 4, 32, 32))
    assert diag.code == "E0410" and "dim 1 is 4, expected 3" in diag.message
    assert diag.help.startswith("set the target's `input` in Tribuild.toml to a shape")
    (diag,) = check_target_input(sig, key, (3, 32, 32))
    assert "rank" in diag.message


def test_checks_are_pure(program):
    for r, item in program.items.items():
        env = program.env.scope_of(r)
        sig = program.env.signatures[r]
        assert check_item(item, sig, r.path, r.item_id, env) == check_item(
            item, sig, r.path, r.item_id, env
        )


BOUND_BY_MEMBER = """
layer P(d: int = 4) {
    let w: Tensor<float32, [K, d]> = 3
    let fc = Linear(d, 2 * d)
    fn forward(x: Tensor<float32, [N, d]>) -> Tensor<float32, [N, 2 * d]> {
        let k = K
        return fc(x)
    }
}
"""


def test_forward_sees_dim_names_bound_by_member_types():
    """Members are evaluated in a step of their own (``Members``); the dim names their declared
    types bind (``K``) stay in scope for `forward`, as in one run."""
    program = load_program({"a.tri": BOUND_BY_MEMBER})
    r = ref(program, "a.tri", "P")
    sig, env = program.env.signatures[r], program.env.scope_of(r)
    generic = check_item(program.items[r], sig, "a.tri", r.item_id, env)
    key = instance_key("a.tri", r.item_id, sig, {}, env)
    instance = check_instance(program.items[r], sig, key, env).diagnostics
    assert [d.message for d in generic] == [
        "member `w`: expected Tensor<float32, [K, d]>, found int"
    ]
    assert [d.message for d in instance] == [
        "member `w`: expected Tensor<float32, [K, 4]>, found int"
    ]


REMEMBERED = """
fn id4(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
    return x
}

layer Twice() {
    let conv = TernaryConv2d(4, 4, kernel=3, padding=1)
    fn forward(x: Tensor<float32, [B, 4, H, W]>, w: Tensor<float32, [B, 5, H, W]>,
               z: Tensor<float32, [B, 4]>, y: Tensor<float32, [5]>) -> Tensor<float32, [B, 4]> {
        let a = conv(conv(x))
        let e = conv(w)
        let b = id4(z)
        let d = id4(z)
        return id4(y)
    }
}
"""


def test_remembered_calls_change_no_finding() -> None:
    """The checker remembers calls that reported nothing (``check_calls``): with its tables empty
    or full, a program says the same; a remembered layer still reports a wrong input, and a
    remembered call uses up its fresh names (`N'k`) as if it ran."""
    from tribuild.lang.check import calls as check_calls

    tables = (check_calls._APPLIED, check_calls._APPLIED_AT, check_calls._SIGNED)
    for table in tables:
        table.clear()
    first = run_program(load_program({"a.tri": REMEMBERED}), instances=False)
    assert all(tables)
    assert run_program(load_program({"a.tri": REMEMBERED}), instances=False) == first
    assert [line.split(": ", 2)[1:] for line in first] == [
        ["E0401", "conv (TernaryConv2d): expected input channels (dim 1) 4, found 5"],
        [
            "E0402",
            "argument `x` of id4: expected Tensor<float32, [N, 4]>, found Tensor<float32, [5]>: "
            "rank is 1, expected 2",
        ],
    ]


def test_a_remembered_call_tells_true_from_1() -> None:
    """`[1]` and `[true]` are equal in Python: the second call is checked, not looked up."""
    program = load_program(
        {
            "a.tri": """
fn pick(ks: [int], x: Tensor<float32, [N]>) -> Tensor<float32, [N]> {
    return x
}

fn both(x: Tensor<float32, [N]>) -> Tensor<float32, [N]> {
    let a = pick([1], x)
    return pick([true], x)
}
"""
        }
    )
    assert [line.split(": ", 2)[1] for line in run_program(program, instances=False)] == ["E0302"]


def test_a_misspelt_keyword_gets_a_suggestion():
    program = load_program(
        {
            "a.tri": """
layer A(n: int = 2) {
    let f = Linear(n, 2, biass=true)
    fn forward(x: Tensor<float32, [N, 2]>) -> Tensor<float32, [N, 2]> { return f(x) }
}
"""
        }
    )
    ((path, item_id, item),) = program.order
    sig, _ = signature_of(item, path, item_id)
    diags = check_item(item, sig, path, item_id, program.env.scope_of(ItemRef(path, item_id, "")))
    assert [(d.code, d.message, d.help) for d in diags] == [
        ("E0306", "keyword `biass` is not a parameter of `Linear`", "did you mean `bias`?")
    ]


HOLDS_A_POOL = """
layer Wrap(pool: MaxPool2d) {
    let p = pool
    let fc = TernaryLinear(8, 8)
    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, 8]> {
        return fc(x)
    }
}

layer Net() {
    let w = Wrap(MaxPool2d(2))
    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, 8]> {
        return w(x)
    }
}
"""


def test_an_argument_left_to_its_default_is_concrete() -> None:
    """A pool's `stride` left out is None (the kernel size, as in PyTorch). A layer holding such
    a pool is still an instance: it was dropped from its parent's children (and generating the
    parent failed with a KeyError), and `instance_key` refused it as "not concrete"."""
    program = load_program({"a.tri": HOLDS_A_POOL})
    net, wrap = ref(program, "a.tri", "Net"), ref(program, "a.tri", "Wrap")
    env = program.env.scope_of(net)
    key = instance_key("a.tri", net.item_id, program.env.signatures[net], {}, env)
    checked = check_instance(program.items[net], program.env.signatures[net], key, env)
    assert checked.diagnostics == ()
    pool = LayerV("MaxPool2d", (("kernel", 2), ("stride", None), ("padding", 0)))
    assert checked.children == (
        ("w", InstanceKey("a.tri", wrap.item_id, "Wrap", (("pool", pool),))),
    )
    assert instance_key(
        "a.tri", wrap.item_id, program.env.signatures[wrap], {"pool": pool}, env
    ) == InstanceKey("a.tri", wrap.item_id, "Wrap", (("pool", pool),))
