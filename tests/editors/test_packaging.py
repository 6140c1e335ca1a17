"""The VS Code extension packs what it runs, not its grammar test (issue 37: `vsce package`
packed test/ and warned of no LICENSE, no .vscodeignore and no repository field)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

EXTENSION = Path(__file__).resolve().parents[2] / "editors" / "vscode"


def packed(root: Path) -> list[str]:
    """The files of ``root`` that ``.vscodeignore``'s globs (as vsce reads them) leave in."""
    globs = [
        line.strip()
        for line in (root / ".vscodeignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs))


def test_the_package_holds_the_extension_and_its_license_not_the_test():
    manifest = json.loads((EXTENSION / "package.json").read_text())
    assert manifest["license"] == "MIT" and "MIT License" in (EXTENSION / "LICENSE").read_text()
    files = packed(EXTENSION)
    assert not [f for f in files if f.startswith("test/")], files
    for needed in ("extension.js", "package.json", "language-configuration.json", "LICENSE"):
        assert needed in files
    assert "syntaxes/tri.tmLanguage.json" in files
    assert ".gitignore" not in files


def test_the_packaging_script_says_there_is_no_repository_and_the_readme_says_why():
    """The project has no public address, so none is invented: `npm run package` passes
    --allow-missing-repository (else vsce stops to ask), and the extension's README says why."""
    manifest = json.loads((EXTENSION / "package.json").read_text())
    assert "repository" not in manifest
    package = manifest["scripts"]["package"].split()
    assert package[-2:] == ["package", "--allow-missing-repository"], package
    assert "--allow-missing-repository" in (EXTENSION / "README.md").read_text()
    assert "README.md" in packed(EXTENSION)
