"""Code generation: IR graphs to a PyTorch module's source (``module``) and ternary layers to
Triton kernel files (``kernels``). Pure text generation: never imports torch or triton."""
