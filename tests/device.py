"""Where the kernel tests run.

By default (and in CI) every Triton kernel runs on the CPU under ``TRITON_INTERPRET=1``.
With ``TRIBUILD_TEST_DEVICE=cuda`` the same tests run on a CUDA GPU through Triton's real
compiler: inputs are made on the CPU from seeded generators, moved with ``on_device``, and the
float64 oracles compare on the CPU. ``make test-cuda`` runs the tests that take this switch.

Terms: the *device* is ``cpu`` or ``cuda``; the *module backend* is the launcher backend a
generated module's test pins: ``torch`` on the CPU (its arithmetic is what the CPU build runs),
``auto`` on CUDA, where it picks the Triton kernels.
"""

from __future__ import annotations

import os

DEVICE = os.environ.get("TRIBUILD_TEST_DEVICE", "cpu")
MODULE_BACKEND = "auto" if DEVICE == "cuda" else "torch"


def configure() -> None:
    """Set ``TRITON_INTERPRET`` for the device; the conftests call this before any kernel is
    defined."""
    if DEVICE == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    elif DEVICE == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("TRIBUILD_TEST_DEVICE=cuda, but torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = (
            False  # the references' float32 ops: IEEE, as on the CPU
        )
        torch.backends.cudnn.allow_tf32 = False
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        raise SystemExit(f"TRIBUILD_TEST_DEVICE must be cpu or cuda, not {DEVICE!r}")


def on_device(*tensors):
    """``tensors`` moved to the test device (``None`` stays ``None``); one tensor alone if one
    is given."""
    moved = tuple(None if t is None else t.to(DEVICE) for t in tensors)
    return moved[0] if len(moved) == 1 else moved
