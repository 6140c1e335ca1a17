"""`tribuild compile IN.tri -o OUT.py`: one file, one layer, one module: a make or ninja rule.

Terms:
- *layer*: ``--target NAME``, or the file's only layer when it defines one.
- *arguments*: ``--arg name=value``, each value read as a TOML value (``256``, ``true``,
  ``[2, 2]``, ``"relu"``; a bare word is a string); parameters not given take the layer's
  defaults.
- The module is written to OUT and its kernel files to ``kernels/`` beside it, each only
  when its bytes change (``restat``). The depfile (``--depfile``) names OUT and every
  ``.tri`` file it was made from, imports included, and the project's Tribuild.toml if there
  is one; paths are relative to the current folder, as the make or ninja rule wrote them.
  It is written first, the module last: a compile killed between them leaves the old
  module, which make and ninja see as out of date, never a new module with an old depfile.
- The database is the project's persistent one (the project around the current folder, or
  around the source when no Tribuild.toml is above the current folder: a build folder of
  make's or ninja's own); the project lock is held only while saving it, so ninja can run
  many compiles at once. An output path that names the source or the other output is
  refused, and so is a depfile that would have to name a path make or ninja reads as
  something else (``depfile.unwritable``): nothing is written then.
"""

from __future__ import annotations

import os
import re
import tomllib

from tribuild.base.hashing import digest
from tribuild.base.record import record
from tribuild.config.load import Target, arg_value
from tribuild.config.problems import ConfigError, Problem
from tribuild.driver import cache, depfile, outputs, timing
from tribuild.driver.build import Request, TargetResult, generated, run, target_result
from tribuild.driver.lock import project_lock
from tribuild.driver.noop import manifest
from tribuild.driver.progress import Quiet
from tribuild.driver.session import Project, open_database, save_database
from tribuild.driver.sources import load_sources
from tribuild.queries.inputs import source_text
from tribuild.queries.report import QuerySources
from tribuild.queries.syntax import item_index

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.config.load import ArgValue
    from tribuild.engine import Database


@record
class CompileResult:
    target: TargetResult
    sources: QuerySources
    written: tuple[str, ...]  # paths whose bytes changed
    files: tuple[str, ...] = ()  # every path of the module and its kernels
    inputs: dict[str, str] | None = None  # root-relative input -> digest of its bytes


_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def parse_arg(text: str) -> tuple[str, object]:
    """``name=value`` -> (name, value); ValueError when it has no ``=``, or when the value
    is neither TOML nor a bare word (``relu``, read as a string): ``[1,`` is a TOML value
    cut short, not the string "[1,"."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ValueError(f"expected name=value, got {text!r}")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError as err:
        if not _BARE_WORD.fullmatch(value.strip()):
            why = str(err).split(" (at ")[0]
            raise ValueError(
                f"the value of {name.strip()} is not a TOML value ({why}): {value!r}; quote "
                "a string that is not a bare word"
            ) from None
        parsed = value
    return name.strip(), arg_value(name.strip(), parsed)  # Tribuild.toml's rule for args


def compile_file(
    src: str,
    out: str,
    layer: str | None = None,
    args: tuple[tuple[str, ArgValue], ...] = (),
    depfile_path: str | None = None,
    opt_level: str | None = None,
    cwd: str | None = None,
) -> CompileResult:
    """Compile layer ``layer`` of ``src`` into ``out`` (ConfigError for usage mistakes)."""
    cwd = cwd or os.getcwd()
    _distinct(cwd, src, out, depfile_path)
    project = _project_of(cwd, os.path.join(cwd, src))
    entry = _entry(project, os.path.join(cwd, src))
    db = open_database(project)
    load_sources(db, project.root, (entry,))
    target = Target(
        os.path.splitext(os.path.basename(out))[0],
        entry,
        layer or _only_layer(db, entry, src),
        tuple(sorted(args)),
        None,
    )
    opt = opt_level or (project.config.opt_level if project.config else "2")
    _, outcomes = run(db, (target,), Request(), opt, Quiet(), timing.Clock(False))
    result, value = target_result(db, target, outcomes, None)
    if value is not None and value.problem is not None:
        raise _usage(src, f"cannot build `{target.entry_layer}`: {value.problem}")
    written: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    if not result.failed:
        _sweep(os.path.join(cwd, out), depfile_path and os.path.join(cwd, depfile_path))
        if depfile_path:  # first: a module newer than its depfile hides new imports from make
            prerequisites = [
                os.path.relpath(os.path.join(project.root, p), cwd)
                for p in depfile.import_closure(db, entry)
            ]
            if project.config:
                prerequisites.append(os.path.relpath(project.config.path, cwd))
            try:
                rendered = depfile.render(out, tuple(prerequisites))
            except depfile.Unwritable as err:  # a path through the current folder
                raise _usage(err.path, f"the depfile cannot name `{err.path}`: {err.why}") from None
            outputs.write_if_changed(os.path.join(cwd, depfile_path), rendered.encode())
        # a target that did not fail has its ``target_build``'s value
        built = generated(value)  # type: ignore[arg-type]
        files, written = _write(os.path.join(cwd, out), built, target.name)
    with project_lock(project.cache_dir):
        save_database(db, project)
        cache.evict(project.cache_dir, project.config.cache_max_bytes if project.config else None)
    inputs = {
        p: digest(text.encode("utf-8"))
        for p in depfile.import_closure(db, entry)
        if (text := source_text(db, p).text) is not None
    }
    if project.config:
        inputs[os.path.relpath(project.config.path, project.root)] = manifest.file_digest(
            project.config.path
        )
    return CompileResult(result, QuerySources(db), written, files, inputs)


def _distinct(cwd: str, src: str, out: str, depfile_path: str | None) -> None:
    """Refuse an output path that is the source or the other output (it would be
    overwritten), and with a depfile, a module path no depfile can name."""
    seen = {os.path.abspath(os.path.join(cwd, src)): "the source"}
    why = depfile.unwritable(out) if depfile_path else None
    if why is not None:  # before compiling: the depfile would name the module
        raise _usage(out, f"-o names a path the depfile cannot name: {why}")
    for path, what in ((out, "-o"), (depfile_path, "--depfile")):
        if path is None:
            continue
        full = os.path.abspath(os.path.join(cwd, path))
        if full in seen:
            raise _usage(
                path, f"{what} names {seen[full]}, which it would overwrite: give it another path"
            )
        seen[full] = f"the {what} output"


def _project_of(cwd: str, source: str) -> Project:
    """The project around the current folder; when there is none (no Tribuild.toml upward)
    and the source lies outside it, the project around the source: make or ninja may run
    the rule in a build folder of its own."""
    project = Project.discover(cwd)
    if project.config is None and _outside(source, project.root):
        project = Project.discover(os.path.dirname(os.path.abspath(source)))
    return project


def _outside(path: str, root: str) -> bool:
    return os.path.relpath(os.path.abspath(path), root).startswith("..")


def _entry(project: Project, full: str) -> str:
    shown = os.path.normpath(full)
    if _outside(full, project.root):
        raise _usage(
            shown,
            f"is outside the project, whose root is {project.root} (the "
            "folder of its Tribuild.toml): compile files of the project only",
        )
    if not os.path.isfile(full):
        raise _usage(shown, "no such file")
    return os.path.relpath(os.path.abspath(full), project.root).replace(os.sep, "/")


def _only_layer(db: Database, entry: str, src: str) -> str:
    layers = [e.name for e in item_index(db, entry) if e.kind == "layer" and e.name is not None]
    if len(layers) != 1:
        found = ", ".join(layers) if layers else "none"
        raise _usage(src, f"pick the layer to compile with --target (layers: {found})")
    return layers[0]


KERNEL_TEMP_AGE = 3600.0  # seconds: a temporary kernel file this old has no live writer


def _sweep(*paths: str | None) -> None:
    """Delete the temporary files that killed compiles left for these paths: the module and
    the depfile, which are this rule's own (make and ninja give an output one rule), so no
    other process can be writing them. The kernels beside the module may be shared by other
    rules running at once: only their temporary files older than ``KERNEL_TEMP_AGE`` are
    deleted (a compile renames its own within seconds)."""
    for path in filter(None, paths):
        outputs.remove_temps(os.path.dirname(path) or ".", {os.path.basename(path)}.__contains__)
    kernels = os.path.join(os.path.dirname(paths[0] or "") or ".", outputs.KERNELS)
    outputs.remove_temps(kernels, lambda name: name.endswith(".py"), KERNEL_TEMP_AGE)


def _write(out: str, files: dict[str, bytes], name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Write the kernels, then the module as ``out``: (every path, paths written). The
    module is renamed into place last, after the depfile and the kernels it loads: a
    compile killed earlier leaves the old module, older than its source, so make and ninja
    run the rule again."""
    folder = os.path.dirname(out)
    module = f"{name}.py"
    paths = {rel: out if rel == module else outputs.resolve(folder, rel) for rel in files}
    order = sorted(files, key=lambda rel: (rel == module, rel))
    written = outputs.write_changed({paths[rel]: files[rel] for rel in order})
    return tuple(sorted(paths.values())), tuple(written)


def _usage(path: str, message: str) -> ConfigError:
    return ConfigError([Problem(path, None, None, "", message)])
