"""Triton kernels of the runtime, one kernel per module, sharing the helpers of ``common``."""
