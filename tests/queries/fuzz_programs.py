"""Random `.tri` programs for the front-end fuzzer: syntactically valid, semantically anything.

Terms:
- *program*: one file of items: constants, `fn`s, functional layers and stateful layers, each
  free to use the items drawn before it (never later ones, so layers cannot recurse: recursion
  has its own adversarial cases).
- *scope*: what an expression may name at its position: construction-time ints (parameters,
  constants, loop variables), bools, tensors (inputs, locals) and members (layers).
Every number is drawn from a pool with 0, negatives and huge values, so the checker's error
paths (empty conv outputs, division by zero, negative dims, work bound) run as well as its
happy paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

INTS = ("0", "1", "2", "3", "4", "8", "16", "64", "-1", "-3", "1000000000")
DTYPES = ("float32", "float16", "bfloat16", "int8", "int32", "int64", "bool", "trit", "float")
ELEMENTWISE = (
    "relu",
    "relu2",
    "relu6",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "quantize_activations",
    "sqrt",
    "exp",
)
NO_ARG_LAYERS = ("ReLU()", "ReLU6()", "GELU()", "SiLU()", "Sigmoid()", "Identity()")
ARITH = ("+", "-", "*", "/", "//", "%")
TENSOR_OPS = ("+", "-", "*", "/", "@", "==", "<", "**")


@dataclass
class Scope:
    ints: list[str] = field(default_factory=list)
    bools: list[str] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    layers: list[tuple[str, int]] = field(
        default_factory=list
    )  # user layers: name, parameter count
    fns: list[tuple[str, int]] = field(default_factory=list)  # user fns: name, tensor parameters

    def child(self) -> "Scope":
        return Scope(
            list(self.ints),
            list(self.bools),
            list(self.tensors),
            list(self.members),
            self.layers,
            self.fns,
        )


def _pick(draw, options):
    return draw(st.sampled_from(tuple(options)))


def int_expr(draw, s: Scope, depth: int = 0) -> str:
    kind = draw(st.integers(0, 5 if depth < 2 else 1))
    if kind == 0 or (kind == 1 and not s.ints):
        return _pick(draw, INTS)
    if kind == 1:
        return _pick(draw, s.ints)
    a, b = int_expr(draw, s, depth + 1), int_expr(draw, s, depth + 1)
    if kind == 2:
        return f"({a} {_pick(draw, ARITH)} {b})"
    if kind == 3:
        return f"({bool_expr(draw, s, depth + 1)} ? {a} : {b})"
    if kind == 4:
        return f"[{a}, {b}][{_pick(draw, ('0', '1', '-1', '0', '1', '2'))}]"
    return f"-{a}"


def bool_expr(draw, s: Scope, depth: int = 0) -> str:
    kind = draw(st.integers(0, 3 if depth < 2 else 0))
    if kind == 0:
        return _pick(draw, ("true", "false", *s.bools))
    if kind == 1:
        left = int_expr(draw, s, depth + 1)
        op = _pick(draw, ("==", "!=", "<", ">="))
        return f"{left} {op} {int_expr(draw, s, depth + 1)}"
    if kind == 2:
        return f"!({bool_expr(draw, s, depth + 1)})"
    left = bool_expr(draw, s, depth + 1)
    op = _pick(draw, ("&&", "||"))
    return f"({left} {op} {bool_expr(draw, s, depth + 1)})"


def dim(draw, s: Scope) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return _pick(draw, ("N", "C", "H", "W", "T", "?"))
    if kind == 1:
        return _pick(draw, ("0", "1", "3", "8", "-2", "16"))
    if kind == 2 and s.ints:
        return _pick(draw, s.ints)
    left = _pick(draw, ("H", "C", "W"))
    op = _pick(draw, ("/", "*", "+", "-"))
    return f"{left} {op} {_pick(draw, ('2', '0', '1'))}"


def tensor_type(draw, s: Scope, ternary: bool = False) -> str:
    dims = ", ".join(dim(draw, s) for _ in range(draw(st.integers(0 if not ternary else 1, 4))))
    if ternary:
        return f"TernaryTensor<trit, [{dims}]>"
    dtype = draw(st.sampled_from(DTYPES[:3] * 3 + DTYPES))
    return draw(st.sampled_from((f"Tensor<{dtype}, [{dims}]>", f"Tensor[{dtype}]")))


def constructor(draw, s: Scope, depth: int = 0) -> str:
    i = lambda: int_expr(draw, s, 1)  # noqa: E731
    kind = draw(st.integers(0, 9 if depth < 2 else 5))
    if kind == 0:
        return _pick(draw, NO_ARG_LAYERS)
    if kind == 1:
        name, sizes = _pick(draw, ("TernaryLinear", "Linear")), f"{i()}, {i()}"
        return f"{name}({sizes}{_pick(draw, ('', ', bias=true', ', bias=1'))})"
    if kind == 2:
        extra = draw(
            st.sampled_from(
                (
                    "",
                    f", stride={i()}",
                    f", padding={i()}",
                    f", groups={i()}",
                    f", stride={i()}, padding={i()}",
                )
            )
        )
        return f"{_pick(draw, ('TernaryConv2d', 'Conv2d'))}({i()}, {i()}, kernel={i()}{extra})"
    if kind == 3:
        return f"{_pick(draw, ('BatchNorm2d', 'LayerNorm', 'RMSNorm'))}({i()})"
    if kind == 4:
        return (
            f"{_pick(draw, ('MaxPool2d', 'AvgPool2d'))}(kernel={i()}, stride={i()}, padding={i()})"
        )
    if kind == 5:
        return _pick(
            draw,
            (
                f"MultiHeadAttention({i()}, {i()})",
                "Dropout(0.1)",
                f"Dropout({i()})",
                f"Embedding({i()}, {i()})",
            ),
        )
    if kind == 6:
        parts = ", ".join(constructor(draw, s, depth + 1) for _ in range(draw(st.integers(0, 3))))
        return f"Sequential([{parts}])"
    if kind == 7:
        inner = s.child()
        inner.ints.append("j")
        return f"Sequential([{constructor(draw, inner, depth + 1)} for j in {i()}..{i()}])"
    if kind == 8 and s.layers:
        name, count = _pick(draw, s.layers)
        args = ", ".join(i() for _ in range(draw(st.integers(max(0, count - 1), count + 1))))
        return f"{name}({args})"
    cond, then = bool_expr(draw, s, 1), constructor(draw, s, depth + 1)
    return f"({cond} ? {then} : {constructor(draw, s, depth + 1)})"


def tensor_expr(draw, s: Scope, depth: int = 0) -> str:
    t = lambda: tensor_expr(draw, s, depth + 1)  # noqa: E731
    i = lambda: int_expr(draw, s, 1)  # noqa: E731
    kind = draw(st.integers(0, 14 if depth < 3 else 1))
    if kind == 0 or (kind == 1 and not s.members):
        return _pick(draw, s.tensors)
    if kind == 1:
        return f"{_pick(draw, s.members)}({t()})"
    if kind == 2:
        return f"{_pick(draw, ELEMENTWISE)}({t()})"
    if kind == 3:
        return (
            f"({t()} {_pick(draw, TENSOR_OPS)} {draw(st.sampled_from((t(), i(), '0.5', 'true')))})"
        )
    if kind == 4:
        x = t()
        sizes = ", ".join(
            draw(st.sampled_from((i(), "-1"))) for _ in range(draw(st.integers(0, 4)))
        )
        return f"reshape({x}, [{sizes}])"
    if kind == 5:
        x = t()
        order = draw(st.permutations(["0", "1", "2", "3"][: draw(st.integers(1, 4))]))
        return f"permute({x}, [{', '.join(order)}])"
    if kind == 6:
        return f"transpose({t()}, {i()}, {i()})"
    if kind == 7:
        return f"concat([{', '.join(t() for _ in range(draw(st.integers(0, 3))))}], {i()})"
    if kind == 8:
        return _pick(
            draw,
            (
                f"flatten({t()}, {i()})",
                f"softmax({t()}, {i()})",
                f"mean({t()}, [{i()}], true)",
                f"sum({t()}, {i()})",
                f"max({t()})",
                f"adaptive_avg_pool2d({t()}, {i()})",
            ),
        )
    if kind == 9:
        return f"{_pick(draw, ('max_pool2d', 'avg_pool2d'))}({t()}, {i()}, {i()}, {i()})"
    if kind == 10:
        return _pick(
            draw,
            (
                f"conv2d({t()}, {t()}, {i()}, {i()}, {i()})",
                f"ternary_matmul({t()}, {t()})",
                f"rope({t()}, {_pick(draw, ('10000.0', '-1.0', i()))})",
                f"attention({t()}, {t()}, {t()}, causal={_pick(draw, ('true', 'false', i()))})",
            ),
        )
    if kind == 11:
        return f"({draw(st.sampled_from((bool_expr(draw, s, 1), t())))} ? {t()} : {t()})"
    if kind == 12 and s.fns:
        name, count = _pick(draw, s.fns)
        return f"{name}({', '.join(t() for _ in range(count))})"
    if kind == 13:
        inner = s.child()
        inner.ints.append("j")
        element, start, end = tensor_expr(draw, inner, depth + 1), i(), i()
        return f"[{element} for j in {start}..{end}][{_pick(draw, ('0', '-1', i()))}]"
    return f"-{t()}"


def statements(draw, s: Scope, depth: int = 0) -> list[str]:
    out = []
    for _ in range(draw(st.integers(0, 4 if depth < 2 else 1))):
        kind = draw(st.integers(0, 6))
        if kind == 0:
            name = f"y{len(s.tensors)}"
            out.append(f"let {name} = {tensor_expr(draw, s)}")
            s.tensors.append(name)
        elif kind == 1:
            out.append(f"{_pick(draw, s.tensors)} = {tensor_expr(draw, s)}")
        elif kind == 2:
            name = f"k{len(s.ints)}"
            out.append(f"let {name}: int = {int_expr(draw, s)}")
            s.ints.append(name)
        elif kind == 3 and s.members:
            members = ", ".join(draw(st.lists(st.sampled_from(s.members), max_size=3)))
            out.append(f"for m in [{members}] {{ {s.tensors[0]} = m({s.tensors[0]}) }}")
        elif kind == 4:
            inner = s.child()
            inner.ints.append("i")
            body = "\n".join(statements(draw, inner, depth + 1))
            out.append(f"for i in {int_expr(draw, s)}..{int_expr(draw, s)} {{\n{body}\n}}")
        elif kind == 5:
            cond = draw(st.sampled_from((bool_expr(draw, s), f"{_pick(draw, s.tensors)} > 0")))
            then, other = (("\n".join(statements(draw, s.child(), depth + 1))) for _ in range(2))
            out.append(f"if {cond} {{\n{then}\n}} else {{\n{other}\n}}")
        else:
            out.append(f"{_pick(draw, s.tensors)} = {_pick(draw, s.tensors)}")
    return out


def params(draw, s: Scope) -> tuple[str, int]:
    out = []
    for n in range(draw(st.integers(0, 3))):
        default = draw(st.sampled_from(("", f" = {int_expr(draw, s)}")))
        out.append(f"p{n}: int{default}")
        s.ints.append(f"p{n}")
    if draw(st.booleans()):
        out.append(f"flag: bool = {_pick(draw, ('true', 'false'))}")
        s.bools.append("flag")
    return ", ".join(out), len(out)


def forward(draw, s: Scope, name: str = "forward", inputs: int = 1, returns: bool = False) -> str:
    args = []
    for n in range(inputs):
        args.append(f"x{n}: {tensor_type(draw, s)}")
        s.tensors.append(f"x{n}")
    ret = f" -> {tensor_type(draw, s)}" if returns or draw(st.booleans()) else ""
    body = "\n".join(statements(draw, s) + [f"return {tensor_expr(draw, s)}"])
    return f"fn {name}({', '.join(args)}){ret} {{\n{body}\n}}"


@st.composite
def programs(draw) -> tuple[str, list[tuple[str, int]]]:
    """``(text, stateful layers as (name, parameter count))``."""
    top = Scope()
    items = []
    for n in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 4))
        s = top.child()
        if kind == 0:
            items.append(
                f"let K{n}: {_pick(draw, ('int', 'float32', 'trit', 'bool'))} = {int_expr(draw, s)}"
            )
            top.ints.append(f"K{n}")
        elif kind == 1:
            count = draw(st.integers(1, 2))
            items.append(forward(draw, s, f"f{n}", count))
            top.fns.append((f"f{n}", count))
        elif kind == 2:
            s.tensors.append("w")
            items.append(
                f"layer F{n}(w: {tensor_type(draw, s, ternary=True)}, "
                + forward(draw, s, "", 1, returns=True)[len("fn (") :]
            )
        else:
            plist, count = params(draw, s)
            members = []
            for m in range(draw(st.integers(0, 4))):
                members.append(f"let m{m} = {constructor(draw, s)}")
                s.members.append(f"m{m}")
            items.append(
                f"layer L{n}({plist}) {{\n" + "\n".join(members) + "\n" + forward(draw, s) + "\n}"
            )
            top.layers.append((f"L{n}", count))
    return "\n\n".join(items) + "\n", top.layers
