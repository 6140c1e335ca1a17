"""The runtime's kernels, one folder per device: ``triton/`` for CUDA (and the interpreter),
``cpu/`` for the CPU (native code)."""
