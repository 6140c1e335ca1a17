"""Native CPU kernels of the runtime: ``ternary.cpp`` (ternary linear layers over 2-bit codes
with BitLinear's int8 quantization fused; AVX-512/VNNI, AVX2 and portable C++ from one source)
and ``build`` (compiled per ISA with the system C++ compiler, cached, loaded with ``ctypes``).
``tribuild.runtime.native`` launches them."""
