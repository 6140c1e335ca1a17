"""Every module of ``tribuild/`` appears in ARCHITECTURE.md's code map: by its path, or by its
name in backticks on the row of its folder (``tribuild/driver/`` ... ``sources``); a
package's ``__init__`` by its folder's row."""

from __future__ import annotations

import os
import re

from tests.architecture.layers import PACKAGE, modules

ARCHITECTURE = os.path.join(os.path.dirname(PACKAGE), "ARCHITECTURE.md")


def code_map(text: str) -> list[tuple[str, str]]:
    """(path cell, description) of each row of the code map's table."""
    section = text.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and not set(cells[0]) <= {"-"}:
            rows.append((cells[0], " | ".join(cells[1:])))
    return rows[1:]  # the header


def unmapped(rows: list[tuple[str, str]], paths: list[str]) -> list[str]:
    """The module paths (relative, ``tribuild/x/y.py``) that no row of ``rows`` names."""
    missing = []
    for path in paths:
        folder, name = path.rsplit("/", 1)
        stem = name[: -len(".py")]
        named = re.compile(rf"`{re.escape(stem)}`|`{re.escape(stem)}[ (]")
        for cell, description in rows:
            paths_here = re.findall(r"`([^`]+)`", cell)
            if path in paths_here:
                break
            if f"{folder}/" in paths_here and (stem == "__init__" or named.search(description)):
                break
        else:
            missing.append(path)
    return missing


def _tree() -> list[str]:
    root = os.path.dirname(PACKAGE)
    return [os.path.relpath(path, root).replace(os.sep, "/") for _, path in modules()]


def test_every_module_is_on_the_map():
    with open(ARCHITECTURE, encoding="utf-8") as f:
        rows = code_map(f.read())
    assert unmapped(rows, _tree()) == []


def test_a_module_missing_from_the_map_is_found():
    rows = code_map(
        "# A\n\n## Code map\n\n| path | what it is |\n|---|---|\n"
        "| `tribuild/driver/` | `build` (a build), `lock` |\n"
        "| `tribuild/project.py` | facts |\n\n## Next\n"
    )
    tree = [
        "tribuild/driver/__init__.py",
        "tribuild/driver/build.py",
        "tribuild/driver/lock.py",
        "tribuild/driver/dump.py",
        "tribuild/project.py",
        "tribuild/terminal.py",
        "tribuild/driver/noop/manifest.py",
    ]
    assert unmapped(rows, tree) == [
        "tribuild/driver/dump.py",
        "tribuild/terminal.py",
        "tribuild/driver/noop/manifest.py",
    ]
