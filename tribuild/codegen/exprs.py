"""One IR node as a Python expression over its inputs' expressions.

Terms:
- *Expr*: generated text with its precedence (Python's: ``ATOM`` for names, calls and
  literals; then ``**``, unary minus, ``* / // % @``, ``+ -``). An operand whose precedence is
  lower than its operator's is parenthesized (the right operand also when equal).
- *symbols*: local names of the dims read from the inputs at run time (``N = x.shape[0]``);
  a symbolic dim (``Dim``) becomes arithmetic over them (``/`` is floor division, ``//``).
- *kernels*: the keys of the kernel files a node runs, called as ``K.<key>``.
- *names*: the attribute of each member of the class (``pyname.member_names``).
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.codegen.pyname import literal, member
from tribuild.ir.graph import Graph, In, InList, Node
from tribuild.lang import Sym, Trit, dims

ATOM, POWER, UNARY, MUL, ADD = 100, 16, 15, 13, 12
_PREC = {"**": POWER, "*": MUL, "/": MUL, "//": MUL, "%": MUL, "@": MUL, "+": ADD, "-": ADD}
_ELEMENTWISE = {
    "relu": "torch.relu",
    "relu6": "F.relu6",
    "gelu": "F.gelu",
    "silu": "F.silu",
    "sigmoid": "torch.sigmoid",
    "tanh": "torch.tanh",
    "sqrt": "torch.sqrt",
    "exp": "torch.exp",
}


@record
class Expr:
    text: str
    prec: int = ATOM


def _operand(e: Expr, prec: int, right: bool = False) -> str:
    return f"({e.text})" if e.prec < prec or (right and e.prec == prec) else e.text


def dim_text(d: dims.DimLike, symbols: dict[str, str]) -> str:
    """A dim as Python arithmetic over the symbol locals."""
    if isinstance(d, dims.AnyDim):
        return "-1"
    terms = []
    for monomial, coeff in d.terms:
        atoms = [
            symbols[a]
            if isinstance(a, str)
            else f"({dim_text(a.num, symbols)} {a.op} {dim_text(a.den, symbols)})"
            for a in monomial
        ]
        factors = ([str(abs(coeff))] if abs(coeff) != 1 or not atoms else []) + atoms
        terms.append(("-" if coeff < 0 else "+", " * ".join(factors)))
    if not terms:
        return "0"
    text = ("-" if terms[0][0] == "-" else "") + terms[0][1]
    return text + "".join(f" {sign} {t}" for sign, t in terms[1:])


def value_text(v: object, symbols: dict[str, str]) -> str:
    if isinstance(v, Sym):
        return dim_text(v.dim, symbols)
    if isinstance(v, Trit):
        return str(v.value)
    if isinstance(v, tuple):
        inner = ", ".join(value_text(x, symbols) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return literal(v)


def expression(
    n: Node,
    args: list[Expr],
    symbols: dict[str, str],
    kernels: tuple[str, ...],
    fn_names: dict[Graph, str],
    names: dict[str, str],
) -> Expr:
    match n.op:
        case "const":
            v = n.attr("value")
            return Expr(literal(v), UNARY if isinstance(v, (int, float)) and v < 0 else ATOM)
        case "unary":
            return args[0] if n.attr("op") == "+" else Expr(f"-{_operand(args[0], UNARY)}", UNARY)
        case "binary":
            op = n.attr("op")
            prec = _PREC[op]
            left = _operand(args[0], prec + 1 if op == "**" else prec)
            return Expr(f"{left} {op} {_operand(args[1], prec, right=op != '**')}", prec)
        case "apply":
            return Expr(f"{member(n.attr('path'), names)}({args[0].text})")
        case "ternary":
            return Expr(_fused(n, args, kernels, names))
        case "layout":
            return Expr(f"model.{n.attr('format')}({args[0].text})")
        case "fn_call":
            return Expr(f"{fn_names[n.attr('body')]}({', '.join(a.text for a in args)})")
        case "call":
            return Expr(_call(n, args, symbols, kernels))
    raise ValueError(f"no expression for op {n.op}")


def _fused(n: Node, args: list[Expr], kernels: tuple[str, ...], names: dict[str, str]) -> str:
    parts = [args[0].text]
    if n.attr("bn") is not None:
        parts.append(f"bn={member(n.attr('bn'), names)}")
    if n.attr("act", "none") != "none":
        parts.append(f"act={literal(n.attr('act'))}")
    if n.attr("residual"):
        parts.append(f"residual={args[-1].text}")
    if n.attr("quantize", False):
        parts.append("quantize=True")
    parts.append(f"kernel=K.{kernels[0]}")
    return f"{member(n.attr('path'), names)}.fused({', '.join(parts)})"


def _call(n: Node, args: list[Expr], symbols: dict[str, str], kernels: tuple[str, ...]) -> str:
    fn = n.attr("fn")
    a = dict(n.attr("args"))

    def arg(name: str) -> str:
        v = a[name]
        if isinstance(v, In):
            return args[v.index].text
        if isinstance(v, InList):
            return "[" + ", ".join(args[i].text for i in v.indices) + "]"
        return value_text(v, symbols)

    x = _operand(args[0], ATOM) if args else ""
    if fn in _ELEMENTWISE:
        return f"{_ELEMENTWISE[fn]}({arg('x')})"
    match fn:
        case "quantize_activations":
            return (
                f"K.{kernels[0]}({arg('x')})"
                if kernels
                else f"launch.quantize_activations({arg('x')})"
            )
        case "relu2":
            return f"torch.square(torch.relu({arg('x')}))"
        case "rope":
            return f"decoding.rope({arg('x')}, {arg('theta')})"
        case "attention":
            return f"decoding.attention({arg('q')}, {arg('k')}, {arg('v')}, {arg('causal')})"
        case "softmax":
            return f"torch.softmax({arg('x')}, {arg('dim')})"
        case "flatten":
            return f"torch.flatten({arg('x')}, {arg('start_dim')})"
        case "reshape":
            shape = tuple(a["shape"]) if isinstance(a["shape"], tuple) else (a["shape"],)
            return f"{x}.reshape{value_text(shape, symbols)}"
        case "transpose":
            return f"{x}.transpose({arg('dim0')}, {arg('dim1')})"
        case "permute":
            return f"{x}.permute{value_text(tuple(a['dims']), symbols)}"
        case "concat":
            return f"torch.cat({arg('xs')}, {arg('dim')})"
        case "mean" | "sum" | "max":
            axes = a["dims"] if a["dims"] is not None else ()  # (): every dim
            axes = axes if isinstance(axes, tuple) else (axes,)
            method = "amax" if fn == "max" else fn
            dim = value_text(axes, symbols) if axes or fn == "max" else "None"
            return f"{x}.{method}(dim={dim}, keepdim={arg('keepdim')})"
        case "adaptive_avg_pool2d":
            return f"F.adaptive_avg_pool2d({arg('x')}, {arg('size')})"
        case "max_pool2d" | "avg_pool2d":
            stride = arg("stride") if a["stride"] is not None else arg("kernel")
            return f"F.{fn}({arg('x')}, {arg('kernel')}, stride={stride}, padding={arg('padding')})"
        case "conv2d":
            return (
                f"F.conv2d({arg('x')}, {arg('w')}, None, {arg('stride')}, {arg('padding')}, 1, "
                f"{arg('groups')})"
            )
        case "ternary_matmul":
            return f"torch.matmul({arg('x')}, {arg('w')})"
        case "cast":
            return f"{x}.to(torch.{a['dtype'] if a['dtype'] != 'int' else 'int64'})"
    raise ValueError(f"no Python for built-in function {fn}")
