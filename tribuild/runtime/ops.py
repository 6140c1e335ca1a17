"""tribuild's kernel launches as PyTorch operators, in the namespace ``tribuild``
(``torch.ops.tribuild.*``), so that ``torch.compile`` and ``torch.export`` record each ternary
call as one node of the graph instead of tracing into the launcher (its autotuner, its caches
keyed by tensor identity, the zero-skip plan read from the weight's values), which they cannot.

Terms:
- *operator*: a schema (tensors, ints, strings: a generated kernel function is no schema type,
  so an operator takes what a kernel file's constants say, such as the activation's name and
  whether to try the tuned configs); one implementation for every device
  (``CompositeExplicitAutograd``: the eager launcher, a Triton kernel on CUDA or under the
  interpreter); a *fake* implementation that gives the output's shape, dtype and device from
  the inputs' alone (what tracing runs); and no autograd (the ``Autograd`` key falls through,
  so outputs do not require grad, as the kernels' outputs never did: training runs the torch
  path).
- *traced call*: the callers (``launch``, ``skip``) call an operator only while
  ``torch.compiler.is_compiling()`` (``torch.compile``, ``torch.export``); eager code calls the
  implementation directly, as the dispatcher would add a few microseconds to every call.
  Defined with ``torch.library.Library`` rather than ``torch.library.custom_op``: the compiled
  graph calls the operator on every run, and ``custom_op``'s Python wrappers cost about 8 µs a
  call on the CPU where a plain ``Library`` implementation costs about 2 µs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

LIBRARY = torch.library.Library("tribuild", "FRAGMENT")

# An operator as its callers use it: called with its schema's arguments, it returns the one
# tensor every schema here returns (``OpOverload.__call__`` is typed to return Any).
Operator = Callable[..., torch.Tensor]


def define(
    schema: str, impl: Callable[..., torch.Tensor], fake: Callable[..., torch.Tensor]
) -> Operator:
    """The operator ``tribuild::<schema>`` (a ``torch._ops.OpOverload``) with the eager
    implementation ``impl`` and the fake implementation ``fake`` (shapes only), without
    autograd."""
    name = schema.split("(", 1)[0]
    LIBRARY.define(schema)
    LIBRARY.impl(name, impl, "CompositeExplicitAutograd")
    LIBRARY.impl(name, torch.library.fallthrough_kernel, "Autograd")
    torch.library.register_fake(f"tribuild::{name}", fake, lib=LIBRARY)
    op: torch._ops.OpOverload = getattr(torch.ops.tribuild, name).default
    return op
