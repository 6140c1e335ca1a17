"""The performance report suite (run it with benchmarks/run.py): the seed's compile-time
tables measured on tribuild. One module per section: ``cold`` (in-process cold compiles),
``edits`` (cache scenarios), ``processes`` (fresh `tribuild build` processes, --jobs),
``scaling`` (generated projects), ``runtime`` (generated modules vs PyTorch); ``zoo`` (the
models and the pipeline), ``timing`` (samples and their statistics), ``seed`` (the claimed
figures and the goals), ``results`` (the JSON), ``tables`` (REPORT.md), ``plots`` (PNGs)."""
