"""ARCHITECTURE.md's layers as data, and the rules that check a module's imports against them.

Terms:
- *unit*: what a rule speaks of: a package right under ``tribuild/`` (``driver``, ``lang``)
  or a top-level module (``project``, ``diagnostics_render``); ``tribuild`` is the package's
  own ``__init__`` and ``__main__``.
- *rank*: a unit's place in the layer drawing (``RANKS``). A module may import its own unit
  and units of a lower rank; an import of an equal or higher rank runs back up (siblings of
  one rank, such as ``lang`` and ``engine``, know nothing of each other).
- *import*: every ``import`` and ``from ... import`` of a module, wherever it stands: at the
  top, inside a function (the lazy imports that keep start-up short) or under
  ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import os

import tribuild

PACKAGE = os.path.dirname(os.path.abspath(tribuild.__file__))

RANKS = {
    "base": 0,
    "project": 1,
    "diagnostics": 1,
    "terminal": 1,
    "remote": 1,
    "lang": 2,
    "engine": 2,
    "config": 2,
    "runtime": 2,
    "ir": 3,
    "diagnostics_render": 3,
    "gpu": 3,  # the runtime's deprecated old name
    "codegen": 4,
    "queries": 5,
    "driver": 6,
    "watch": 7,
    "lsp": 7,
    "cli": 8,
    "tribuild": 9,  # tribuild/__init__.py (the Python API) and __main__.py
}

# units that may import no more than these units of tribuild (their own aside)
ONLY = {"runtime": {"base", "remote"}}

# the runtime's modules the compiler may import (the driver's ``cpu_kernels``: standard
# library only, invariant 3); the Python API (``tribuild``) and the old name may import any
COMPILER_MAY_IMPORT = {"tribuild.runtime.kernels.cpu", "tribuild.runtime.kernels.cpu.build"}
RUNTIME_USERS = {"runtime", "gpu", "tribuild"}

# third-party and standard modules that only these units may import
OWNERS = {
    "argparse": {"cli"},
    "pygls": {"lsp"},
    "lsprotocol": {"lsp"},
    "torch": {"runtime", "tribuild"},  # tribuild/__init__: type annotations and lazy calls
    "triton": {"runtime"},
    "redis": {"remote"},
    "networkx": {"engine"},
}

# packages that others reach through their ``__init__`` only (the facade says what they may use)
FACADES = {"lang", "engine", "remote", "watch"}


def unit_of(module: str) -> str:
    """The unit of the tribuild module ``module`` (``tribuild.driver.build`` -> ``driver``)."""
    parts = module.split(".")
    return "tribuild" if len(parts) == 1 or parts[1] == "__main__" else parts[1]


def module_name(path: str) -> str:
    """``tribuild/driver/build.py`` -> ``tribuild.driver.build`` (a package: its ``__init__``
    dropped)."""
    rel = os.path.relpath(path, os.path.dirname(PACKAGE))[: -len(".py")]
    parts = rel.split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str, str]]:
    """(line, module as written, imported module) of every import in ``source``, the module
    ``module``. A name imported from a package is the package's submodule if it is one
    (``from tribuild import terminal``), else the package."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, base, sub if _is_module(sub) else base))
    return found


def _is_module(name: str) -> bool:
    if not name.startswith("tribuild."):
        return False
    path = os.path.join(os.path.dirname(PACKAGE), *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def violations(module: str, imported: list[tuple[int, str, str]]) -> list[str]:
    """What breaks a rule among the imports ``imported`` (``imports``) of the module
    ``module``."""
    mine = unit_of(module)
    found = []
    for line, written, name in imported:
        where = f"{module}:{line} imports {name}"
        top = name.split(".")[0]
        if top != "tribuild":
            owners = OWNERS.get(top)
            if owners is not None and mine not in owners:
                found.append(f"{where}: only {', '.join(sorted(owners))} may import {top}")
            continue
        theirs = unit_of(name)
        if theirs == mine:
            continue
        if theirs not in RANKS:
            found.append(f"{where}: {theirs} has no place in the layers (RANKS)")
        elif mine in ONLY and theirs not in ONLY[mine]:
            allowed = ", ".join(sorted(ONLY[mine]))
            found.append(f"{where}: {mine} imports only itself and {allowed}")
        elif theirs == "runtime" and mine not in RUNTIME_USERS and name not in COMPILER_MAY_IMPORT:
            allowed = ", ".join(sorted(COMPILER_MAY_IMPORT))
            found.append(f"{where}: the compiler imports of the runtime only {allowed}")
        elif RANKS[theirs] >= RANKS.get(mine, -1):
            found.append(f"{where}: {theirs} is not below {mine}: the import runs back up")
        elif theirs in FACADES and written != f"tribuild.{theirs}":
            found.append(f"{where}: go through tribuild.{theirs} (its __init__ says what to use)")
    return found


def modules() -> list[tuple[str, str]]:
    """(module name, path) of every module of tribuild."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [(module_name(os.path.join(folder, f)), os.path.join(folder, f)) for f in files]
    return sorted((name, path) for name, path in found if path.endswith(".py"))


def tree_violations() -> list[str]:
    found = []
    for name, path in modules():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        found += violations(name, imports(source, name, path.endswith("__init__.py")))
    return found
