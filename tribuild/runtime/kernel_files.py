"""Importing generated files by path: the kernel files beside a generated module, and the
generated modules themselves when a pickle (``torch.save`` of a whole model) names them.

Terms:
- *kernel file*: ``kernels/<key>.py`` beside a generated module; its ``run`` launches the
  layer's Triton kernel. It is imported as ``tribuild_kernels.<key>``, once per path.
- *generated module*: a ``.py`` file written by tribuild; a user may have imported it under
  any name (a path on ``sys.path``, ``importlib`` with a name of their own, or
  ``tribuild.compile_model``'s ``tribuild_models.<stem>``). ``generated_class`` finds a class
  of it again by the file's path: an imported module with that file if there is one, else the
  file imported under the stable name ``tribuild_generated.<digest of its path>``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import weakref
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

from tribuild.base.hashing import digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    import torch  # for annotations only: importing a kernel file imports torch, not this


def _import_path(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_kernel_file(path: str) -> Callable[..., torch.Tensor]:
    """The ``run`` function of the kernel file at ``path``, imported once."""
    resolved = Path(path).resolve()
    name = f"tribuild_kernels.{resolved.stem}"
    module = sys.modules.get(name)
    if module is None or Path(module.__file__ or "").resolve() != resolved:
        module = _import_path(name, str(resolved))
    run: Callable[..., torch.Tensor] = module.run
    return run


def load_kernels(module_file: str, keys: tuple[str, ...]) -> SimpleNamespace:
    """The ``run`` functions of the kernel files ``kernels/<key>.py`` beside ``module_file``."""
    folder = Path(module_file).resolve().parent / "kernels"
    return SimpleNamespace(**{key: load_kernel_file(str(folder / f"{key}.py")) for key in keys})


_classes: weakref.WeakValueDictionary[tuple[str, str], type] = weakref.WeakValueDictionary()


def register_class(cls: type) -> None:
    """Remember a generated class by its file and name, for ``generated_class`` (a module
    imported with ``importlib`` under a name of its own is not in ``sys.modules``)."""
    _classes[(class_file(cls), cls.__qualname__)] = cls


def class_file(cls: type) -> str:
    """The resolved path of the file that defines the generated class ``cls``."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None) if module is not None else None
    if not isinstance(path, str):
        path = cls.__dict__["forward"].__code__.co_filename
    return os.path.realpath(path)


def generated_class(module_name: str, path: str, qualname: str) -> Any:
    """The class ``qualname`` of the generated module at ``path`` (``module_name``: the name it
    had when pickled, tried first)."""
    known = _classes.get((path, qualname))
    if known is not None:
        return known
    module = sys.modules.get(module_name)
    if module is None or os.path.realpath(getattr(module, "__file__", "") or "") != path:
        module = next(
            (
                m
                for m in list(sys.modules.values())
                if isinstance(file := getattr(m, "__file__", None), str)
                and os.path.realpath(file) == path
            ),
            None,
        )
    if module is None:
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"the generated module {path} that this model was saved from is gone; "
                "rebuild it (tribuild build) at the same path before loading"
            )
        module = _import_path(f"tribuild_generated.m{digest(path.encode())[:16]}", path)
    cls: object = module
    for part in qualname.split("."):
        cls = getattr(cls, part)
    assert isinstance(cls, type)
    return cls
