"""Incremental test cases as data, in the style of mypy's fine-grained tests.

A case file holds sections that start with a header line:
- ``== file PATH``: the file's text before the first build;
- ``== file PATH.N``: its text from step N on (N >= 2); ``== delete PATH.N`` deletes it;
- ``== rerun.N``: the exact set of queries expected to execute at step N, one per line, as
  ``name arg1 arg2`` (lines starting with ``#`` are comments; order does not matter).
Step 1 is the first (clean) build. ``run_case`` replays a case with a caller's build
function; ``TRIBUILD_UPDATE_GOLDEN=1`` rewrites the ``rerun`` sections from what ran (review
the diff: it is the behaviour under test).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tribuild.engine import Database

_HEADER = re.compile(r"^== (file|delete|rerun)(?: (\S+?))?(?:\.(\d+))?$")


@dataclass
class Case:
    files: dict[str, str] = field(default_factory=dict)
    edits: dict[int, dict[str, str | None]] = field(default_factory=dict)  # None = delete
    reruns: dict[int, set[str]] = field(default_factory=dict)

    @property
    def steps(self) -> list[int]:
        return sorted(set(self.edits) | set(self.reruns))


def parse_case(text: str) -> Case:
    case = Case()
    kind = path = step = None
    body: list[str] = []

    def flush():
        if kind is None:
            return
        content = "\n".join(body).strip("\n") + "\n"
        if kind == "rerun":
            lines = (ln.strip() for ln in body)
            case.reruns[step] = {ln for ln in lines if ln and not ln.startswith("#")}
        elif kind == "file" and step is None:
            case.files[path] = content
        else:
            case.edits.setdefault(step, {})[path] = content if kind == "file" else None

    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            flush()
            kind, path, step = m.group(1), m.group(2), m.group(3) and int(m.group(3))
            body = []
        else:
            body.append(line)
    flush()
    return case


def format_key(name: str, args: tuple) -> str:
    return " ".join([name, *map(str, args)])


def run_case(case_path: Path, root: Path, build: Callable[[Database, Path], object]) -> None:
    """Replay a case in ``root``: after each step, the output of ``build`` equals a clean
    build's, and exactly the expected queries ran."""
    case = parse_case(case_path.read_text())
    write_files(root, case.files)
    db = Database()
    build(db, root)
    observed: dict[int, list[str]] = {}
    for step in case.steps:
        write_files(root, case.edits.get(step, {}))
        with db.log() as log:
            incremental = build(db, root)
        observed[step] = sorted({format_key(name, args) for name, args in log.executed})
        assert incremental == build(Database(), root), f"step {step}: differs from a clean build"
        if not _UPDATE:
            assert set(observed[step]) == case.reruns.get(step, set()), f"step {step}"
    if _UPDATE:
        _rewrite(case_path, observed)


_UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def write_files(root: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        full = root / path
        if text is None:
            full.unlink()
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text)


def _rewrite(case_path: Path, observed: dict[int, list[str]]) -> None:
    kept = []
    skipping = False
    for line in case_path.read_text().splitlines():
        if line.startswith("== "):
            skipping = line.startswith("== rerun.")
        if not skipping:
            kept.append(line)
    text = "\n".join(kept).rstrip("\n") + "\n"
    for step, keys in observed.items():
        text += f"\n== rerun.{step}\n" + "".join(k + "\n" for k in keys)
    case_path.write_text(text)
