"""One line about each built-in, for an editor's hover and completion (docs/language.md §7
has the full rules). A test checks that every built-in has one."""

from __future__ import annotations

_SAME = "applies {} elementwise: same shape"

SUMMARIES: dict[str, str] = {
    "TernaryLinear": "ternary fully connected layer: [..., in_features] -> [..., out_features]",
    "Linear": "full-precision fully connected layer: [..., in_features] -> [..., out_features]",
    "TernaryConv2d": "ternary 2-d convolution: [N, in, H, W] -> [N, out, (H + 2p - k) / s + 1, "
    "(W + 2p - k) / s + 1]",
    "Conv2d": "full-precision 2-d convolution: [N, in, H, W] -> [N, out, (H + 2p - k) / s + 1, "
    "(W + 2p - k) / s + 1]",
    "BatchNorm2d": "batch normalisation over channel dim 1 of [N, C, H, W]; same shape",
    "LayerNorm": "layer normalisation over the last dim; same shape",
    "RMSNorm": "root-mean-square normalisation over the last dim; same shape",
    "Dropout": "zeroes elements with probability p while training; same shape",
    "MaxPool2d": "max over kernel x kernel windows of the last two dims",
    "AvgPool2d": "mean over kernel x kernel windows of the last two dims",
    "Sequential": "applies each layer of a list to the previous one's output",
    "MultiHeadAttention": "self-attention with `heads` heads: [N, T, d] -> [N, T, d]",
    "Embedding": "token embedding: integer ids [...] -> float32 vectors [..., dim]",
    "ReLU": "layer form of relu: same shape",
    "ReLU6": "layer form of relu6: same shape",
    "GELU": "layer form of gelu: same shape",
    "SiLU": "layer form of silu: same shape",
    "Sigmoid": "layer form of sigmoid: same shape",
    "Tanh": "layer form of tanh: same shape",
    "Identity": "returns its input",
    "relu": _SAME.format("max(x, 0)"),
    "relu2": _SAME.format("relu(x) ** 2 (squared ReLU)"),
    "relu6": _SAME.format("min(max(x, 0), 6)"),
    "gelu": _SAME.format("GELU"),
    "silu": _SAME.format("x * sigmoid(x)"),
    "sigmoid": _SAME.format("the logistic function"),
    "tanh": _SAME.format("tanh"),
    "quantize_activations": "BitNet's 8-bit absmax activation quantization; same shape",
    "sqrt": "square root: same shape on tensors, a float on construction-time numbers",
    "exp": "exponential: same shape on tensors, a float on construction-time numbers",
    "softmax": "softmax along `dim`; same shape",
    "flatten": "multiplies the dims from `start_dim` on into one",
    "reshape": "same elements in a new shape; at most one -1 (or ?) is inferred",
    "transpose": "swaps dims `dim0` and `dim1`",
    "permute": "reorders the dims by the permutation `dims`",
    "concat": "joins tensors of equal rank along `dim`, equal in every other dim",
    "mean": "mean over `dims` (all by default), dropped or kept as 1 with `keepdim`",
    "sum": "sum over `dims` (all by default), dropped or kept as 1 with `keepdim`",
    "max": "maximum over `dims` (all by default), dropped or kept as 1 with `keepdim`",
    "adaptive_avg_pool2d": "mean-pools the last two dims to `size` (an int or [h, w])",
    "max_pool2d": "max over windows of the last two dims",
    "avg_pool2d": "mean over windows of the last two dims",
    "conv2d": "2-d convolution of x [N, C, H, W] with weights w [O, C / groups, kh, kw]",
    "ternary_matmul": "matrix product with a TernaryTensor; the result is float",
    "trit": "a ternary value: -1, 0 or 1",
    "rope": "rotary position embeddings of [..., T, D] (rotate-half, D even); same shape",
    "attention": "softmax(q k^T / sqrt(D)) v; grouped-query heads, `causal` masks the future: "
    "q [N, H, T, D], k [N, Hkv, S, D], v [N, Hkv, S, Dv] -> [N, H, T, Dv]",
    "cast": 'the tensor in another dtype (cast(x, "float32")): same shape',
}
