"""Incremental test cases as data, in the style of mypy's fine-grained tests.

A case file holds sections that start with a header line:
- ``== file PATH``: the file's text before the first build;
- ``== file PATH.N``: its text from step N on (N >= 2); ``== delete PATH.N`` deletes it;
- ``== rerun.N``: the exact set of queries expected to execute at step N, one per line, as
  ``name arg1 arg2`` (lines starting with ``#`` are comments; order does not matter).
Step 1 is the first (clean) build. Every step checks every project file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

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
