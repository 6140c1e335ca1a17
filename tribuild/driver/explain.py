"""`tribuild explain OUTPUT` and `tribuild graph`: why an output was last written, and the
file or query graph.

Terms:
- *explanation record*: ``<cache dir>/explain.json``, output path (relative to the project
  root) -> the lines saying why the build that last wrote it did so (the engine's why-chain,
  computed while that build's database was in memory: the persistent store does not keep
  causes). Each build replaces the entries of the outputs it wrote. The file holds each
  distinct explanation once (``{"why": [lines, ...], "outputs": {path: index}}``): the
  outputs of one target share theirs (written per output, the record of a large project ran
  to megabytes).
- *file graph*: every .tri file the targets are made from, an edge from each file to each
  file it imports, and an edge from each target to its entry file.
- *query graph*: every key of the persistent database (``Database.graph()``), edges from a
  dependency to its dependent.
"""

from __future__ import annotations

import json
import os

from tribuild.base.files import OWN_FILE_BYTES, read_regular
from tribuild.base.tempname import replace
from tribuild.engine import NEVER_RAN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.config.load import Target
    from tribuild.driver.remote.build_cache import Hit
    from tribuild.driver.results import BuildResult
    from tribuild.driver.session import Project
    from tribuild.engine import Database, Query

NAME = "explain.json"


def record(cache_dir: str, root: str, out_dir: str, explanations: dict[str, list[str]]) -> None:
    """Merge the explanations of this build's written outputs (out-relative) into the record
    (compact JSON, not synced: after a crash of the machine it may be lost, and ``load``
    then finds nothing)."""
    if not explanations:
        return
    data = load(cache_dir)
    prefix = os.path.relpath(out_dir, root)
    for rel, lines in explanations.items():
        data[os.path.normpath(os.path.join(prefix, rel))] = lines
    index: dict[tuple[str, ...], int] = {}  # an explanation -> its place in "why"
    outputs = {
        path: index.setdefault(tuple(lines), len(index)) for path, lines in sorted(data.items())
    }
    replace(
        os.path.join(cache_dir, NAME),
        json.dumps({"why": list(index), "outputs": outputs}).encode(),
        sync=False,
    )


def load(cache_dir: str) -> dict[str, list[str]]:
    """The record as output path -> lines; empty when missing or damaged."""
    try:
        data = json.loads(read_regular(os.path.join(cache_dir, NAME), OWN_FILE_BYTES))
        why, outputs = data["why"], data["outputs"]
        good = [type(lines) is list and all(type(line) is str for line in lines) for lines in why]
        return {
            path: why[i]
            for path, i in outputs.items()
            if type(path) is str and type(i) is int and 0 <= i < len(why) and good[i]
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def why(cache_dir: str, root: str, output: str) -> list[str] | None:
    """The explanation of ``output`` (a path as the user typed it), None if unknown."""
    return load(cache_dir).get(os.path.relpath(os.path.abspath(output), root))


_PHRASES = {
    "target_build": "the files of target",
    "module_source": "the module of target",
    "class_source": "the class generated for",
    "optimized_ir": "the optimized IR of",
    "ir": "the IR of",
    "instance_fns": "the fns called by",
    "checked_instance": "the check of",
    "instance_members": "the members of",
    "instance_children": "the layers built by",
    "instance_diagnostics": "the diagnostics of",
    "item_ast": "the syntax tree of",
    "item_tokens": "the tokens of",
    "item_diagnostics": "the diagnostics of",
    "signature": "the signature of",
    "generic_members": "the members of",
    "const_value": "the value of",
    "source_text": "the text of",
    "chunks": "the lexed chunks of",
    "item_places": "where the items are in",
    "item_index": "the items of",
    "imports": "the imports of",
    "scope": "the names visible in",
    "kernel_source": "the kernel",
}


def why_written(
    db: Database,
    keys: dict[str, tuple[Query, tuple[object, ...]]],
    result: BuildResult,
    executed: list[tuple[str, tuple[object, ...]]],
) -> dict[str, list[str]]:
    """Why each output written by this build was written, like ``ninja -d explain``: the
    engine's chain from the target's query back to the input whose change made it run."""
    assert result.report is not None  # called once the outputs are written
    ran, written_now = set(executed), set(result.report.written)
    remote = result.remote
    hits: dict[str, Hit] = remote.hits if remote is not None else {}
    where = remote.link.where if remote is not None else ""
    out = {}
    for target in result.targets:
        written = [rel for rel in target.files if rel in written_now]
        if not written or (target.name not in keys and target.name not in hits):
            continue
        query, args = keys.get(target.name, (None, ()))
        if target.name in hits:
            why = [
                f"target {target.name}: taken from the remote cache "
                f"{where} (the file on disk was missing or held other bytes)"
            ]
        elif query is not None and (query.name, args) in ran:  # None: taken from the remote
            lines = db.explain(query, *args, label=step_label).splitlines()
            why = [f"target {target.name}:"] + ["  " + line for line in lines]
            if lines[-1].endswith(NEVER_RAN):
                why.append(
                    "  (no build this cache remembers made this target with this entry, "
                    "args, input shape and -O level: Tribuild.toml or the command line "
                    "changed, or the cache is new)"
                )
        else:
            why = [
                f"target {target.name}: its queries were up to date; the file on disk "
                "was missing or held other bytes"
            ]
        out.update({rel: why for rel in written})
    return out


def step_label(query: str, args: tuple[object, ...]) -> str:
    """A key of the why-chain in the user's words: ``the class generated for `Dense(64, 48)`
    in models/lib/blocks.tri``, not ``class_source(InstanceKey(...), ...)``; the query's
    name follows in brackets for who wants to look further (``--queries`` graphs)."""
    from tribuild.codegen.kernels import KernelSpec
    from tribuild.lang import InstanceKey, format_value

    def arg(a: object) -> str | None:
        if isinstance(a, InstanceKey):
            shown = ", ".join(format_value(v) for _, v in a.args)
            return f"`{a.name}({shown})` in {a.path}"
        if isinstance(a, KernelSpec):
            return f"`{a.key}`"
        return None

    shown = [x for x in map(arg, args) if x is not None]
    if query in ("target_build", "module_source"):
        shown = [f"`{args[0]}`"]
    elif not shown and len(args) == 2 and all(isinstance(a, str) for a in args):
        shown = [f"`{args[1]}` in {args[0]}"]  # (path, item id)
    elif not shown and len(args) == 1 and isinstance(args[0], str):
        shown = [args[0]]  # a file
    if not shown:
        return f"{query}({', '.join(map(repr, args))})"
    phrase = _PHRASES.get(query, f"{query} of")
    return f"{phrase} {' '.join(shown)} [{query}]"


def unknown(root: str, out_dir: str, output: str) -> str:
    """Why ``explain`` has nothing to say about ``output`` (a path as the user typed it):
    it is no output of this project, or no build recorded since the cache was made has
    written it (its bytes were up to date)."""
    from tribuild.driver.outputs import Record

    rel = os.path.relpath(os.path.abspath(output), out_dir)
    for target, files in sorted(Record.load(out_dir).targets.items()):
        if rel in files:
            return (
                f"{output} (target {target}) has not been written since the cache was "
                "made: every build since found its bytes up to date"
            )
    return (
        f"{output} is not an output of this project (its outputs are written under "
        f"{os.path.relpath(out_dir, root)}{os.sep})"
    )


def graph(project: Project, queries: bool) -> dict[str, list[Any]]:
    """The file graph of the project's targets, or (``queries``) the query graph of the
    database its last build saved."""
    from tribuild.driver.build import select
    from tribuild.driver.session import open_database
    from tribuild.driver.sources import load_sources

    targets = select(project, ())
    db = open_database(project)
    if queries:
        return query_graph(db)
    load_sources(db, project.root, tuple(t.entry_path for t in targets))
    return file_graph(db, targets)


def file_graph(db: Database, targets: tuple[Target, ...]) -> dict[str, list[Any]]:
    """``{"nodes": [...], "edges": [[from, to], ...]}`` of the file graph."""
    from tribuild.driver.depfile import import_closure
    from tribuild.queries.names import import_targets

    files = sorted({p for t in targets for p in import_closure(db, t.entry_path)})
    edges = [[f"target:{t.name}", t.entry_path] for t in targets]
    edges += [[path, dep] for path in files for dep in import_targets(db, path)]
    return {"nodes": [f"target:{t.name}" for t in targets] + files, "edges": edges}


def query_graph(db: Database) -> dict[str, list[Any]]:
    g = db.graph()
    label = {node: f"{node[0]}{node[1]!r}" for node in g.nodes}
    return {
        "nodes": sorted(label.values()),
        "edges": sorted([label[a], label[b]] for a, b in g.edges),
    }


def dot(graph: dict[str, list[Any]]) -> str:
    lines = ["digraph tribuild {"]
    lines += [f"  {json.dumps(node)};" for node in graph["nodes"]]
    lines += [f"  {json.dumps(a)} -> {json.dumps(b)};" for a, b in graph["edges"]]
    return "\n".join(lines + ["}"]) + "\n"
