"""The CPU benchmark of issue 34 (run it with ``benchmarks/bench_cpu.py``): tribuild's generated
BitNet LM beside transformers' dense float32 ``BitNetForCausalLM`` and llama.cpp's TQ2_0, each
in a process of its own, on the same random ternary weights. One module per side:
``protocol`` (the configs and the measurements every LM runtime goes through; standard library
only, so llama.cpp's process imports no torch), ``torch_side`` (the checkpoint folder, the
tribuild and transformers runtimes, the GEMV and bandwidth figures, ResNet-18), ``llama_side``
(the GGUF file and the llama.cpp runtime; numpy, gguf and llama_cpp only), ``tables`` (the
Markdown and the goals)."""
