"""tribuild: an incremental, query-based compiler for ternary neural networks.

The Python API (imports nothing heavy until called):
- ``compile_model(path, layer, opt_level=2, **args)``: the generated ``nn.Module`` class of
  one layer; ``Model.from_float(state_dict)`` gives an instance with ternarized weights.
- ``build(project_dir=".", jobs=None, timing=False, targets=(), opt_level=None,
  trace_memory=False)``: what `tribuild build` does, returning the result (outputs,
  diagnostics, timing report).
"""


def compile_model(path, layer, opt_level=2, **args):
    from tribuild.driver.api import compile_model as run

    return run(path, layer, opt_level, **args)


def build(project_dir=".", jobs=None, timing=False, targets=(), opt_level=None, trace_memory=False):
    from tribuild.driver.api import build as run

    return run(project_dir, jobs, timing, targets, opt_level, trace_memory)
