"""The Python API: `import tribuild` stays cheap, compile_model goes through the persistent
cache (a fresh process with nothing changed imports the module without the engine), build
returns outputs, diagnostics and timing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tribuild

PROBE = """\
import json, sys, tribuild
Model = tribuild.compile_model("models/mlp.tri", "MLP", hidden=8)
print(json.dumps([Model.__name__, hasattr(Model, "from_float"),
                  "tribuild.engine" in sys.modules, "tribuild.queries" in sys.modules]))
"""


def _probe(cwd) -> list:
    run = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_import_is_cheap():
    code = "import sys, tribuild; print(sorted(m for m in sys.modules if m.startswith('tribuild')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip() == "['tribuild']"


def test_compile_model_second_call_is_a_cache_lookup(mini):
    assert _probe(mini) == ["MLP", True, True, True]
    assert _probe(mini) == ["MLP", True, False, False]
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("Linear(hidden, 10)", "TernaryLinear(hidden, 10)"))
    assert _probe(mini) == ["MLP", True, True, True]


RACER = """\
import json, sys, time, tribuild
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # all start together
Model = tribuild.compile_model("models/mlp.tri", "MLP", hidden=8)
print(json.dumps("tribuild.engine" in sys.modules))
"""


def test_compile_model_at_once_in_several_processes(mini):
    """The ranks of one torchrun call compile_model for the same model at the same moment:
    each must get the model, and one compiles while the others wait and then load its
    work (a compile's sweep of leftover temporary files deleted another's file in flight:
    FileNotFoundError from the fsync)."""
    import time

    start = str(time.time() + 3.0)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, start], cwd=mini, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    compiled = []
    for racer in racers:
        out, _ = racer.communicate(timeout=300)
        assert racer.returncode == 0
        compiled.append(json.loads(out.splitlines()[-1]))
    assert compiled.count(True) == 1


def test_compile_model_reports_errors(mini):
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("fc1(x)", "fc1(q)"))
    try:
        tribuild.compile_model(str(mlp), "MLP")
    except Exception as err:  # tribuild.driver.api.BuildError
        assert "error[" in str(err) and "`q`" in str(err)
    else:
        raise AssertionError("no error")


def test_compile_model_takes_list_arguments(tmp_path):
    """A list argument, as a Python user writes it, is a tuple to the compiler (it was a
    TypeError, "unhashable type: 'list'", from deep in the engine); a value no .tri
    argument can hold is a ValueError that names it."""
    (tmp_path / "stack.tri").write_text(
        "layer Stack(widths: [int] = [4]) {\n"
        "    let layers = [Linear(8, w) for w in widths]\n"
        "    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, ?]> {\n"
        "        return layers[0](x)\n"
        "    }\n"
        "}\n"
    )
    Model = tribuild.compile_model(str(tmp_path / "stack.tri"), "Stack", widths=[3, 5])
    assert Model.ARGS == {"widths": (3, 5)}
    again = tribuild.compile_model(str(tmp_path / "stack.tri"), "Stack", widths=(3, 5))
    assert again.__module__ == Model.__module__ and again.ARGS == Model.ARGS  # one module
    with pytest.raises(ValueError, match=r"argument widths\[1\] is None"):
        tribuild.compile_model(str(tmp_path / "stack.tri"), "Stack", widths=[3, None])


def test_build_returns_outputs_diagnostics_and_timing(mini):
    result = tribuild.build(str(mini), jobs=2, timing=True)
    assert not result.failed and result.diagnostics == []
    assert sorted(
        p.rsplit("/", 1)[1] for p in result.outputs if p.endswith(".py") and "/kernels/" not in p
    ) == ["mlp.py", "net.py", "twin.py", "wide.py"]
    assert "query stages" in result.timing.text()


def test_timing_traces_allocations_only_when_asked(mini, monkeypatch):
    """``timing`` reads the resident peaks from the system at the end; tracing Python's
    allocations (which slows a build several times) is ``trace_memory``'s alone."""
    import tracemalloc

    from tribuild.driver import timing

    seen = []
    stage = timing.Clock.stage

    def spy(self, name):
        seen.append(tracemalloc.is_tracing())
        return stage(self, name)

    monkeypatch.setattr(timing.Clock, "stage", spy)
    plain = tribuild.build(str(mini), jobs=2, timing=True).timing
    assert seen and not any(seen) and plain.traced_bytes is None
    assert plain.peak_bytes > 2**20 and plain.child_peak_bytes > 2**20  # a worker ran
    seen.clear()
    traced = tribuild.build(str(mini), jobs=1, trace_memory=True).timing
    assert seen and all(seen) and not tracemalloc.is_tracing()
    assert traced.traced_bytes > 0 and "traced peak" in traced.text()
    toml = mini / "Tribuild.toml"  # a build that raises midway stops tracing too
    toml.write_text(toml.read_text().replace("models/mlp.tri:MLP", "models/mlp.tri:Nope"))
    try:
        tribuild.build(str(mini), trace_memory=True)
    except Exception as err:  # ConfigError, raised once the entry is read
        assert "defines no layer `Nope`" in str(err)
    else:
        raise AssertionError("no error")
    assert not tracemalloc.is_tracing()


def test_arguments_are_checked_before_any_work(mini):
    result = tribuild.build(str(mini), opt_level=2, targets="mlp")  # as Tribuild.toml has it
    assert not result.failed and [t.name for t in result.targets] == ["mlp"]
    assert "at -O2" in (mini / "out" / "mlp.py").read_text()
    for bad in ({"opt_level": 7}, {"opt_level": "O3"}, {"jobs": -1}, {"jobs": "2"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            tribuild.build(str(mini), **bad)
    with pytest.raises(ValueError, match="opt_level"):
        tribuild.compile_model(str(mini / "models" / "mlp.tri"), "MLP", opt_level=None)


def test_compile_model_without_torch_says_which_extra_to_install(mini):
    """Issue 37: after `make zoo` alone (the compiler's install: no torch), compile_model
    died with "No module named 'torch'" from inside the cache folder. It says which extra
    to install. The process has no torch: ``sys.modules["torch"] = None`` makes every
    import of it fail as a missing package's does."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import tribuild\n"
        "try:\n"
        "    tribuild.compile_model('models/mlp.tri', 'MLP')\n"
        "except ModuleNotFoundError as err:\n"
        "    print(err.name, '|', err)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=mini, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    name, message = run.stdout.strip().split(" | ")
    assert name == "torch"
    assert message.endswith(
        "needs `torch`, which is not installed: pip install 'tribuild[runtime]'"
    )
