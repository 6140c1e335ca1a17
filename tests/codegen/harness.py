"""Building zoo targets in tests: one database over the repository's models, targets built
with any arguments and level, their files written to a folder and the module imported.

Terms: a *build* is ``(entry, args, level)`` with ``entry = "models/<file>.tri:<Layer>"``;
``write_and_import`` writes a TargetBuild's files under a folder and imports ``<name>.py``
under a module name unique to that folder.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.lang.check.values import normalise
from tribuild.queries.codegen import TargetBuild, target_build

REPO = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def zoo_db() -> Database:
    db = Database()
    load_sources(db, str(REPO), scan(str(REPO), ("models",)))
    return db


def target_args(args: dict) -> tuple:
    return tuple(sorted((k, normalise(v)) for k, v in args.items()))


def build(
    entry: str, args: dict, level: str, name: str = "model", db: Database | None = None
) -> TargetBuild:
    path, layer = entry.split(":")
    return target_build(db or zoo_db(), name, path, layer, target_args(args), None, level)


def write(result: TargetBuild, folder: Path) -> None:
    assert result.problem is None and not result.diagnostics, (result.problem, result.diagnostics)
    for f in result.files:
        out = folder / f.relpath
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f.text)


def write_and_import(result: TargetBuild, folder: Path, name: str = "model"):
    write(result, folder)
    unique = "generated_" + "_".join(folder.parts[-3:]).replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(unique, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
