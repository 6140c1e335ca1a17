"""``tribuild.summary(model)``: one row per layer of a generated module (or its float twin,
or any ``nn.Module``): the layer's kind, its weight shapes, how many ternary and float
parameters it holds, and the bytes of its packed ternary weights (2-bit codes plus float32
scales). Latent weights (training copies of the ternary ones) are counted as ternary
parameters, not float ones; a totals row ends the table.
"""

from __future__ import annotations

import math

from torch import nn

from tribuild.runtime.nn import TernaryLayer


def _row(name: str, module: nn.Module) -> tuple[str, str, str, int, int, int] | None:
    """``(name, kind, shapes, ternary, float, packed bytes)`` of a layer's own weights."""
    ternary: dict[str, tuple[int, ...]] = {}
    packed = 0
    if isinstance(module, TernaryLayer):
        ternary = dict(module.TERNARY)
        for weight, _ in module.TERNARY:
            for buffer in (weight, f"{weight}_scale"):
                t = module.get_buffer(buffer)
                packed += t.numel() * t.element_size()
    for weight, shape in module.__dict__.get("trit_shapes", {}).items():
        ternary[weight] = shape
        t = module.get_buffer(weight)
        packed += t.numel() * t.element_size()
    floats: dict[str, tuple[int, ...]] = {}
    for pname, p in module.named_parameters(recurse=False):
        if pname.startswith("latent_") and pname[len("latent_") :] in ternary:
            continue
        floats[pname] = tuple(p.shape)
    if not ternary and not floats:
        return None
    shapes = ", ".join(f"{k} {list(s)}" for k, s in list(ternary.items()) + list(floats.items()))
    t_count = sum(math.prod(s) for s in ternary.values())
    f_count = sum(math.prod(s) for s in floats.values())
    return name or "(root)", type(module).__name__, shapes, t_count, f_count, packed


def summary_rows(model: nn.Module) -> list[tuple[str, str, str, int, int, int]]:
    """The table's rows, without the totals."""
    return [r for n, m in model.named_modules() if (r := _row(n, m)) is not None]


def summary(model: nn.Module, print_it: bool = True) -> str | None:
    """The table of ``model``'s layers: printed, or returned as text when ``print_it`` is
    false (not both: a REPL shows what a call returns, so it showed the table twice)."""
    rows = summary_rows(model)
    total = (
        "total",
        "",
        "",
        sum(r[3] for r in rows),
        sum(r[4] for r in rows),
        sum(r[5] for r in rows),
    )
    head = ("layer", "kind", "weights", "ternary", "float", "packed bytes")
    cells = [head] + [tuple(str(c) if isinstance(c, int) else c for c in r) for r in rows]
    cells.append(tuple(str(c) if isinstance(c, int) else c for c in total))
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = []
    for i, r in enumerate(cells):
        parts = [
            r[j].rjust(widths[j]) if j >= 3 else r[j].ljust(widths[j]) for j in range(len(head))
        ]
        lines.append("  ".join(parts).rstrip())
        if i == 0 or i == len(cells) - 2:
            lines.append("  ".join("-" * w for w in widths))
    text = f"{type(model).__name__}\n" + "\n".join(lines)
    if print_it:
        print(text)
        return None
    return text


__all__ = ["summary", "summary_rows"]
