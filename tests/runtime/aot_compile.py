"""Compile every kernel to a CUDA binary (PTX and cubin, sm_90) without a GPU, through
Triton's real compiler rather than the interpreter, which accepts some programs the
compiler rejects. Run as ``python -m tests.runtime.aot_compile`` with TRITON_INTERPRET unset;
prints one line per variant and exits non-zero on the first failure.
"""

import os

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tribuild.runtime.kernels.triton.act_quant import act_quant_kernel
from tribuild.runtime.kernels.triton.ternary_conv2d import ternary_conv2d_kernel
from tribuild.runtime.kernels.triton.ternary_depthwise import ternary_depthwise_kernel
from tribuild.runtime.kernels.triton.ternary_gemm import ternary_gemm_kernel
from tribuild.runtime.kernels.triton.ternary_gemv import ternary_gemv_kernel

TARGET = GPUTarget("cuda", 90, 32)


def pointers(dtype: str) -> dict[str, str]:
    return {
        "x_ptr": f"*{dtype}",
        "w_ptr": "*u8",
        "scale_ptr": "*fp32",
        "bias_ptr": "*fp32",
        "res_ptr": f"*{dtype}",
        "out_ptr": f"*{dtype}",
    }


def ints(names: str) -> dict[str, str]:
    return {name: "i32" for name in names.split()}


def epilogue(act: str, on: bool = True) -> dict:
    return {"CHANNEL_SCALE": on, "HAS_BIAS": on, "ACT": act, "HAS_RESIDUAL": on}


GEMM = ints("M N K row_bytes")
CONV = ints("C H W N OH OW M row_bytes stride_h stride_w pad_h pad_w")
VARIANTS = [
    (
        ternary_gemm_kernel,
        {**pointers("fp16"), **GEMM},
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, **epilogue("gelu")},
    ),
    (
        ternary_gemm_kernel,
        {**pointers("fp32"), **GEMM},
        {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32, **epilogue("none", False)},
    ),
    *[
        (
            ternary_gemv_kernel,
            {**pointers("fp16"), **GEMM},
            {"BLOCK_N": 32, "BLOCK_K": 256, **epilogue(act, act == "silu")},
        )
        for act in ("relu", "relu6", "silu", "sigmoid")
    ],
    (
        ternary_conv2d_kernel,
        {**pointers("fp16"), **CONV},
        {"KH": 3, "KW": 3, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, **epilogue("relu")},
    ),
    (
        ternary_depthwise_kernel,
        {**pointers("fp32"), **CONV},
        {"KH": 3, "KW": 3, "BLOCK_M": 128, "BLOCK_N": 8, **epilogue("relu6")},
    ),
    (act_quant_kernel, {"x_ptr": "*fp16", "out_ptr": "*fp16", "K": "i32"}, {"BLOCK_K": 1024}),
]


def main() -> None:
    assert os.environ.get("TRITON_INTERPRET") != "1", "unset TRITON_INTERPRET to compile"
    for kernel, signature, constexprs in VARIANTS:
        compiled = triton.compile(ASTSource(kernel, signature, constexprs), target=TARGET)
        print(
            kernel.__name__, constexprs.get("ACT", ""), len(compiled.asm["cubin"]), "bytes of cubin"
        )


if __name__ == "__main__":
    main()
