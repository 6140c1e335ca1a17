"""The Python API behind ``tribuild.compile_model`` and ``tribuild.driver``.

Terms:
- *model folder*: ``<cache dir>/models/``: ``compile_model`` writes each compiled layer
  there as ``<file stem>_<layer>_<key>.py`` (key: a digest of the arguments and the level),
  with its kernels in ``kernels/`` beside it, through the project's database and
  persistent cache (`tribuild compile` does the work).
- *model manifest*: one manifest per compiled layer (``manifest`` module), so a later call
  whose inputs are unchanged imports the module straight away: no engine, no compiler. It
  records the digest of the module's bytes too: the module is read once, checked against
  it, and those very bytes are run (an edit that kept its size and mtime is recompiled,
  never run).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from tribuild.base.files import OWN_FILE_BYTES, read_regular
from tribuild.base.hashing import digest
from tribuild.driver.noop import manifest
from tribuild.project import DEFAULT_CACHE_DIR, OPT_LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType
    from typing import Any

    from tribuild.driver.results import BuildResult


class BuildError(RuntimeError):
    """The program has errors; ``str()`` is the rendered diagnostics."""


def opt(level: object) -> str:
    """An ``-O`` level as the driver names it ("0"-"3", "s"), from an int or a string;
    ValueError for anything else (before any work starts)."""
    text = str(level) if type(level) in (int, str) else None
    if text not in OPT_LEVELS:
        raise ValueError(f"opt_level must be one of 0, 1, 2, 3 or 's', not {level!r}")
    assert text is not None  # in OPT_LEVELS
    return text


# the class is generated: what it holds (a torch ``nn.Module`` with ``from_float``, ...) is
# known to no type checker, so it is ``type[Any]``
def compile_model(path: str, layer: str, opt_level: int | str = 2, **args: object) -> type[Any]:
    """The generated ``nn.Module`` class of ``layer`` in ``path`` built with ``args`` (its
    defaults for the others); ``.from_float(state_dict)`` gives a loaded instance."""
    level = opt(opt_level)
    source = os.path.abspath(path)
    located = manifest.locate(os.path.dirname(source))
    root, cache_dir = located or (
        os.path.dirname(source),
        os.path.join(os.path.dirname(source), DEFAULT_CACHE_DIR),
    )
    key = json.dumps(
        [os.path.relpath(source, root), layer, sorted(args.items()), level], default=list
    )
    stem = f"{os.path.splitext(os.path.basename(source))[0]}_{layer}_{digest(key.encode())[:12]}"
    module_path = os.path.join(cache_dir, "models", f"{stem}.py")
    record = f"model-{stem}.json"
    vouched = manifest.vouching(root, cache_dir, key, record)
    code = vouched and _checked(module_path, vouched.get("module"))
    if not code:
        from tribuild.driver.lock import model_lock

        with model_lock(os.path.dirname(module_path), stem):
            vouched = manifest.vouching(root, cache_dir, key, record)  # another process's work
            code = vouched and _checked(module_path, vouched.get("module"))
            if not code:
                code = _compile(
                    root, cache_dir, source, module_path, layer, args, level, key, record
                )
    model: type[Any] = _import(stem, module_path, code).Model
    return model


def _checked(path: str, recorded: object) -> bytes | None:
    """The bytes of the module at ``path`` if their digest is ``recorded``, else None."""
    try:
        code = read_regular(path, OWN_FILE_BYTES)
    except OSError:
        return None
    return code if digest(code) == recorded else None


def _compile(
    root: str,
    cache_dir: str,
    source: str,
    module_path: str,
    layer: str,
    args: dict[str, object],
    opt: str,
    key: str,
    record: str,
) -> bytes:
    """Compile the module; its bytes, as written and recorded in the model manifest."""
    from tribuild.config.load import arg_value
    from tribuild.diagnostics_render import render_text
    from tribuild.driver.compile import compile_file

    values = tuple((name, arg_value(name, value)) for name, value in args.items())
    result = compile_file(source, module_path, layer, values, None, opt, cwd=root)
    if result.target.failed:
        raise BuildError(
            "\n".join(
                [result.target.error or ""]
                + [render_text(d, result.sources) for d in result.target.diagnostics]
            ).strip()
        )
    outputs = [os.path.relpath(p, root) for p in result.files]
    code = read_regular(module_path, OWN_FILE_BYTES)
    data = manifest.snapshot(root, cache_dir, key, result.inputs or {}, tuple(outputs))
    data["module"] = digest(code)
    manifest.write(cache_dir, data, record)
    return code


def _import(stem: str, path: str, code: bytes) -> ModuleType:
    """The module ``path`` run from ``code`` (its checked bytes, not read again)."""
    name = f"tribuild_models.{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(compile(code, path, "exec"), module.__dict__)
    except ModuleNotFoundError as err:
        sys.modules.pop(name, None)
        if err.name not in RUNTIME_PACKAGES:
            raise
        # the compiler needs neither (invariant 3): a project built by `make zoo` alone, or
        # `pip install tribuild`, has no torch; the generated module is what needs it
        raise ModuleNotFoundError(
            f"the generated module {path} needs `{err.name}`, which is not installed: "
            "pip install 'tribuild[runtime]'",
            name=err.name,
        ) from None
    return module


RUNTIME_PACKAGES = frozenset({"torch", "numpy"})  # what the extra `runtime` installs


def build(
    project_dir: str = ".",
    jobs: int | None = None,
    timing: bool = False,
    targets: str | Iterable[str] = (),
    opt_level: int | str | None = None,
    trace_memory: bool = False,
) -> BuildResult:
    """Build a project like `tribuild build`; returns the driver's ``BuildResult``
    (``.outputs``, ``.diagnostics``, ``.failed``, ``.timing``). ConfigError for mistakes in
    Tribuild.toml, ValueError for bad arguments (``targets``: a name or names; ``jobs``: a
    number of processes, 0 for one per CPU; ``opt_level``: 0-3 or "s", as int or string).
    ``trace_memory``: the timing report with Python's allocations traced (like
    ``--trace-memory``; implies ``timing``)."""
    from tribuild.driver.build import Request
    from tribuild.driver.build import build as run
    from tribuild.driver.session import Project

    names = (targets,) if isinstance(targets, str) else tuple(targets)
    if jobs is not None and (type(jobs) is not int or jobs < 0):
        raise ValueError(
            f"jobs must be a number of processes (0: one per CPU) or None, not {jobs!r}"
        )
    level = None if opt_level is None else opt(opt_level)
    project = Project.discover(project_dir)
    request = Request.of(
        project,
        targets=names,
        jobs=jobs,
        opt_level=level,
        timing=timing,
        trace_memory=trace_memory,
    )
    return run(project, request)
