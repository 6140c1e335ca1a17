"""The runtime's old name, kept so that user code and modules pickled or saved whole before the
rename still load: ``tribuild.gpu`` and every ``tribuild.gpu.<module>`` are the very module
objects of ``tribuild.runtime`` (so classes stay identical for pickle and ``isinstance``),
reached through a finder that warns once per name with a ``DeprecationWarning``.

- *old name*: ``tribuild.gpu.X``; its *new name* is ``tribuild.runtime.X``, except the Triton
  kernels, which moved from ``tribuild.gpu.kernels.X`` to ``tribuild.runtime.kernels.triton.X``.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

from tribuild.runtime import *  # noqa: F403  (what `from tribuild.gpu import pack_ternary` used)
from tribuild.runtime import __all__ as __all__

OLD = "tribuild.gpu"
NEW = "tribuild.runtime"


def new_name(old: str) -> str:
    rest = old[len(OLD) :]
    if rest == ".kernels" or rest.startswith(".kernels."):
        # the Triton kernels were the only kernels; CPU ones now sit beside them
        rest = ".kernels.triton" + rest[len(".kernels") :]
    return NEW + rest


def deprecated(old: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} is now {new_name(old)}: import it by its new name",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import tribuild.gpu.X`` with the already-imported ``tribuild.runtime.X``."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(OLD + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # import machinery would stamp the alias spec on the real module; keep the real one
        module = importlib.import_module(new_name(spec.name))
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        old = module.__spec__.name if module.__spec__ else OLD
        module.__spec__ = self._real_spec
        # importlib's own frames stand between here and the importing line, so the message
        # names both modules rather than relying on the location it points at
        deprecated(old, stacklevel=2)


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())

# warn for the package itself; the submodules warn as they are imported
deprecated(OLD, stacklevel=2)
