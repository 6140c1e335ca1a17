"""The command line: a table of small subcommands. Parsing and printing only; the work is
done in ``tribuild.driver``.

Exit codes: 0 success, 1 errors in the user's program (diagnostics printed on stderr),
2 usage or configuration errors.
"""

from __future__ import annotations

import os
import sys

from tribuild import terminal
from tribuild.project import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_USER,
    OPT_LEVELS,
    job_count,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (~3 ms)
if TYPE_CHECKING:
    import argparse

_GC_THRESHOLDS = (50_000, 20, 100)  # Python's defaults: (700, 10, 10)


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", help=".tri files or folders (default: the project's sources)"
    )
    p.add_argument(
        "--format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="json: one object on stdout (docs/output.md); sarif: a SARIF 2.1.0 log on stdout; "
        "github: GitHub Actions annotations on stdout",
    )
    p.add_argument(
        "--stats", action="store_true", help="print the engine's work: queries run vs reused"
    )


def _check(args) -> int:
    import json

    from tribuild.config.problems import ConfigError
    from tribuild.diagnostics_render import render_text
    from tribuild.driver import formats
    from tribuild.driver.check import check

    try:
        result = check(_project(), tuple(args.paths))
    except ConfigError as err:
        if args.format == "json":  # the one object still, for the editor or annotator reading it
            json.dump(formats.check_config_json(err), sys.stdout, indent=1)
            print()
        raise  # and the text on stderr, exit 2 (``_run``)
    if args.format in ("json", "sarif"):
        if args.format == "json":
            data = formats.check_json(result)
        else:
            data = formats.sarif(result.diagnostics, result.sources, _version())
        json.dump(data, sys.stdout, indent=1)
        print()
    elif args.format == "github":
        sys.stdout.write(formats.github(result.diagnostics, result.sources))
        print(_summary(result), file=sys.stderr)
    else:
        color = terminal.color(sys.stderr)
        for diag in result.diagnostics:
            print(render_text(diag, result.sources, color=color), file=sys.stderr)
        print(_summary(result), file=sys.stderr)
    if args.stats:
        print(
            f"queries: {result.executed} executed, {result.validated} validated, "
            f"{result.hits} reused (store: {result.store})",
            file=sys.stderr,
        )
    return EXIT_USER if result.errors else EXIT_OK


def _summary(result) -> str:
    files = f"{len(result.files)} file{'s' * (len(result.files) != 1)}"
    if result.targets:
        files += f" and {result.targets} target{'s' * (result.targets != 1)}"
    if not result.errors:
        return f"checked {files}: no errors"
    return f"checked {files}: {result.errors} error{'s' * (result.errors != 1)}"


def _project():
    from tribuild.driver.session import Project

    return Project.discover(os.getcwd())


def _build_args(p) -> None:
    p.add_argument("targets", nargs="*", help="targets of Tribuild.toml (default: all)")
    p.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        help="processes building at once; 0 = one per CPU (default: [project] jobs)",
    )
    p.add_argument(
        "-O",
        dest="opt_level",
        choices=OPT_LEVELS,
        metavar="LEVEL",
        help="-O0, -O1, -O2, -O3 or -Os (default: [project] opt_level)",
    )
    p.add_argument("--timing", action="store_true", help="print time per stage, hit rates, memory")
    p.add_argument(
        "--trace-memory",
        action="store_true",
        help="--timing, with the peak of Python's allocations traced (slows the "
        "build several times)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        nargs="?",
        const="tribuild.prof",
        help="run under cProfile, write FILE and print the top functions",
    )
    p.add_argument(
        "--stop-after",
        choices=("parse", "check", "codegen"),
        help="stop after this stage; write nothing",
    )
    dump = p.add_mutually_exclusive_group()
    dump.add_argument("--dump-ast", action="store_true", help="print the AST of every input")
    dump.add_argument("--dump-code", action="store_true", help="print the generated files")
    dump.add_argument(
        "--dump-ir",
        action="store_true",
        help="print the optimised IR of every instance of the targets",
    )
    p.add_argument("--explain", action="store_true", help="say why each output was rebuilt")
    p.add_argument(
        "-k",
        "--keep-going",
        action="store_true",
        help="report every failing target in full (default: the first)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, only problems")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="json: the result as one object on stdout (docs/output.md); github: GitHub "
        "Actions annotations on stdout (both imply --quiet's progress)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite files at output paths that tribuild did not write (refused otherwise)",
    )


def _build(args) -> int:
    from tribuild.driver import buildcmd

    return buildcmd.run(_project(), args)


def _compile_args(p) -> None:
    p.add_argument("source", metavar="IN.tri", help="the .tri file that defines the layer")
    p.add_argument("-o", dest="output", metavar="OUT.py", required=True, help="the module to write")
    p.add_argument("--target", metavar="LAYER", help="the layer to compile (default: the only one)")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_arg,
        help="a construction argument (a TOML value); others take their defaults",
    )
    p.add_argument("--depfile", metavar="OUT.d", help="write a Makefile-syntax depfile")
    p.add_argument(
        "-O",
        dest="opt_level",
        choices=OPT_LEVELS,
        metavar="LEVEL",
        help="-O0, -O1, -O2, -O3 or -Os (default: [project] opt_level, else 2)",
    )
    p.add_argument(
        "--touch",
        action="store_true",
        help="update the module's and depfile's modification times even when their bytes "
        "are unchanged (make has no restat: this lets it settle)",
    )


def _compile(args) -> int:
    from tribuild.driver.buildcmd import show_target
    from tribuild.driver.compile import compile_file

    result = compile_file(
        args.source, args.output, args.target, tuple(args.arg), args.depfile, args.opt_level
    )
    show_target(result.target, result.sources)
    if result.target.failed:
        return EXIT_USER
    if args.touch:  # the depfile first: make compares the module's time with the sources'
        for path in (args.depfile, args.output):
            if path:
                os.utime(path)
    return EXIT_OK


def _init_args(p) -> None:
    p.add_argument("folder", nargs="?", default=".", help="where to create the project")
    p.add_argument("--name", help="the project's name (default: the folder's)")


def _init(args) -> int:
    from tribuild.driver.starter import init_project

    try:
        written = init_project(args.folder, args.name)
    except FileExistsError as err:
        print(f"tribuild init: {err} exists; nothing written", file=sys.stderr)
        return EXIT_USAGE
    for path in written:
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)
    at = "" if os.path.abspath(args.folder) == os.getcwd() else f"-C {args.folder} "
    print(
        "next:\n"
        f"  tribuild {at}check    # check models/mlp.tri and the target\n"
        f"  tribuild {at}build    # write build/mlp.py and its kernels\n"
        f"  tribuild {at}watch    # rebuild on every save",
        file=sys.stderr,
    )
    return EXIT_OK


def _clean(args) -> int:
    from tribuild.driver.build import select
    from tribuild.driver.cache import evict
    from tribuild.driver.lock import project_lock
    from tribuild.driver.noop import manifest
    from tribuild.driver.outputs import clean, why_kept

    project = _project()
    select(project, ())
    with project_lock(project.cache_dir, lambda message: print(message, file=sys.stderr)):
        manifest.forget(project.cache_dir)
        removed, kept = clean(project.out_dir)
        evict(project.cache_dir, None)  # the cache's temporary files only
    print(f"removed {len(removed)} files", file=sys.stderr)
    for rel in kept:
        print(f"kept {rel}: {why_kept(project.out_dir, rel)}", file=sys.stderr)
    return EXIT_OK


def _cache_args(p) -> None:
    p.add_argument("action", choices=("stats", "clear", "prune", "validate", "remote-check"))
    p.add_argument(
        "--days", type=_days, help="prune: delete what was not used for DAYS days (0 or more)"
    )


def _cache(args) -> int:
    from tribuild.driver import cache
    from tribuild.driver.lock import project_lock

    project = _project()
    if args.action == "prune" and args.days is None:
        print("tribuild cache prune: --days N is required", file=sys.stderr)
        return EXIT_USAGE
    limit = project.config.cache_max_bytes if project.config else None
    if args.action == "remote-check":
        from tribuild.driver.remote.check import remote_check

        ok, lines = remote_check(project.config.remote if project.config else None)
        print("\n".join(lines))
        return EXIT_OK if ok else EXIT_USER
    with project_lock(project.cache_dir, lambda m: print(m, file=sys.stderr)):
        if args.action == "stats":
            from tribuild.driver.remote import stats

            remote = stats.describe(project.cache_dir)
            print(cache.describe(project.cache_dir, limit) + (f"\n{remote}" if remote else ""))
        elif args.action == "clear":
            print(f"deleted {cache.clear(project.cache_dir, project.root)} files", file=sys.stderr)
        elif args.action == "prune":
            gone = cache.prune(project.cache_dir, args.days)
            print(f"pruned {len(gone)} generations", file=sys.stderr)
        else:
            bad = cache.validate(project.cache_dir)
            for sid, problem in bad:
                print(f"generation {sid}: {problem}; deleted", file=sys.stderr)
            print(f"validated: {len(bad)} corrupt generations", file=sys.stderr)
            return EXIT_USER if bad else EXIT_OK
    return EXIT_OK


def _graph_args(p) -> None:
    p.add_argument("--format", choices=("dot", "json"), default="dot")
    p.add_argument(
        "--queries",
        action="store_true",
        help="the query graph of the last build instead of the file graph",
    )


def _graph(args) -> int:
    import json

    from tribuild.driver import explain
    from tribuild.driver.build import select
    from tribuild.driver.session import open_database
    from tribuild.driver.sources import load_sources

    project = _project()
    targets = select(project, ())
    db = open_database(project)
    if args.queries:
        graph = explain.query_graph(db)
        if not graph["nodes"]:
            print(
                "tribuild graph: the cache holds no queries yet: run `tribuild build` first",
                file=sys.stderr,
            )
    else:
        load_sources(db, project.root, tuple(t.entry_path for t in targets))
        graph = explain.file_graph(db, targets)
    sys.stdout.write(explain.dot(graph) if args.format == "dot" else json.dumps(graph, indent=1))
    return EXIT_OK


def _explain_args(p) -> None:
    p.add_argument("output", help="a file `tribuild build` wrote")


def _explain(args) -> int:
    from tribuild.driver import explain

    project = _project()
    lines = explain.why(project.cache_dir, project.root, args.output)
    if lines is None:
        print(
            f"tribuild explain: {explain.unknown(project.root, project.out_dir, args.output)}",
            file=sys.stderr,
        )
        return EXIT_USER
    print("\n".join([f"{args.output}: last written because"] + ["  " + line for line in lines]))
    return EXIT_OK


def _watch_args(p) -> None:
    from tribuild.watch.command import add_args

    add_args(p)


def _watch(args) -> int:
    from tribuild.watch.command import run

    return run(_project(), args)


def _fmt_args(p) -> None:
    p.add_argument(
        "paths", nargs="*", help=".tri files or folders (default: the project's sources)"
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file would change"
    )


def _fmt(args) -> int:
    from tribuild.driver.fmt import format_files

    result = format_files(_project(), tuple(args.paths), args.check)
    for path, why in result.skipped:
        print(f"{path}: not formatted: {why}", file=sys.stderr)
    verb = "would reformat" if args.check else "reformatted"
    for path in result.changed:
        print(f"{verb} {path}", file=sys.stderr)
    print(f"{len(result.changed)} of {result.files} files {verb}", file=sys.stderr)
    return EXIT_USER if (args.check and result.changed) or result.skipped else EXIT_OK


def _lsp_args(p) -> None:
    from tribuild.lsp.command import add_args

    add_args(p)


def _lsp(args) -> int:
    from tribuild.lsp.command import run

    return run(args)


COMMANDS = {
    "build": ("build the targets of Tribuild.toml into its output folder", _build_args, _build),
    "compile": (
        "compile one layer of one file into a module (a make or ninja rule)",
        _compile_args,
        _compile,
    ),
    "check": ("report diagnostics for .tri files; exit 1 if any error", _check_args, _check),
    "clean": ("delete the outputs tribuild wrote (not the cache)", lambda p: None, _clean),
    "init": ("write a starter Tribuild.toml and models/mlp.tri", _init_args, _init),
    "graph": (
        "print the file graph (or --queries: the query graph) as dot or JSON",
        _graph_args,
        _graph,
    ),
    "explain": (
        "why an output was last written: the chain back to the changed input",
        _explain_args,
        _explain,
    ),
    "cache": (
        "the persistent cache: stats, clear, prune --days N, validate, remote-check",
        _cache_args,
        _cache,
    ),
    "watch": (
        "build, then rebuild on every change of the sources or Tribuild.toml",
        _watch_args,
        _watch,
    ),
    "lsp": ("a Language Server Protocol server on stdio, for editors", _lsp_args, _lsp),
    "fmt": (
        "lay out .tri files (indentation, blank lines); --check to only report",
        _fmt_args,
        _fmt,
    ),
}


def _arg(text: str):
    import argparse

    from tribuild.driver.compile import parse_arg

    try:
        return parse_arg(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _days(text: str) -> float:
    import argparse
    import math

    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not (0 <= days < math.inf):
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more, got {text!r}")
    return days


def _jobs(text: str) -> int:
    """``--jobs``: a number of processes, 0 for one per CPU (as ``jobs`` in Tribuild.toml)."""
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected a number of processes (0 = one per CPU), got {text!r}"
        )
    return job_count(int(text))


def parser():
    """The argparse parser of every command."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="tribuild",
        description="Compile .tri programs (ternary neural networks) into PyTorch modules "
        "with one Triton kernel per ternary layer, redoing only what an edit invalidated.",
        epilog="Run `tribuild COMMAND --help` for the options of a command. The options above "
        "come before the command. Docs: docs/build.md and docs/language.md.",
    )
    # handled by ``main`` before argparse runs (the no-op path has no argparse): listed for --help
    parser.add_argument(
        "-C",
        metavar="DIR",
        dest="directory",
        default=argparse.SUPPRESS,
        help="run as if started in DIR",
    )
    parser.add_argument(
        "--color",
        choices=terminal.CHOICES,
        default=argparse.SUPPRESS,
        help="color diagnostics: auto (a terminal, unless NO_COLOR is set; FORCE_COLOR forces "
        "it), always or never",
    )
    parser.add_argument(
        "--version", action="store_true", default=argparse.SUPPRESS, help="print tribuild's version"
    )
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_args, _) in COMMANDS.items():
        add_args(subs.add_parser(name, help=help_text, description=help_text))
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that it unwinds as from a Ctrl-C (watch
    stops, a build gives back make's job tokens); forked workers inherit the handler."""


def _terminate(signum, frame):
    raise Terminated


def entry() -> None:
    """The console script and ``python -m tribuild``: ``main`` on the command line, then the
    process ends at once: standard streams flushed, then ``os._exit``, sparing the
    interpreter's teardown, which frees the query database object by object (longer than a
    whole no-op build). Every file a command writes is closed
    (and, where it must be, synced) before it returns, and tribuild registers no ``atexit``
    work. An interruption (Ctrl-C) prints one line and exits 130 (128 + SIGINT, as shells
    do); SIGTERM (``kill``, make or ninja stopping) unwinds the same way (``Terminated``),
    so files are whole and make's job tokens are given back, and exits 143; a closed
    standard output (a reader like ``head`` that stopped) exits 141 (128 + SIGPIPE) without
    a word; another exception still ends the process the usual way. Such a process, unless
    it watches (it runs for hours), keeps the databases it opens until that end
    (``gcpause.hold_until_exit``: returning from the command would free them the same way),
    and collects cyclic garbage less often (``_GC_THRESHOLDS``): a build makes many objects
    that live until it ends, and the default thresholds run dozens of collections over
    them in a small edit's build."""
    argv = sys.argv[1:]
    import _signal  # what ``signal`` wraps: importing ``signal`` costs ~1 ms of enums

    _signal.signal(_signal.SIGTERM, _terminate)
    if argv[:1] != ["watch"]:
        import gc

        from tribuild.base.gcpause import hold_until_exit

        gc.set_threshold(*_GC_THRESHOLDS)
        hold_until_exit()
    try:
        code = main(argv)
        sys.stdout.flush()
    except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM: every file is whole or not there
        terminated = isinstance(stop, Terminated)
        print(f"tribuild: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        code = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:  # `tribuild graph | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the command of ``argv`` (default: ``sys.argv[1:]``); its exit code. A simple
    `tribuild build` line (``build.quick``) is answered from the manifest when nothing
    changed, and otherwise built without argparse."""
    argv = sys.argv[1:] if argv is None else argv
    argv, code = _global_options(argv)
    if code is not None:
        return code
    if argv[:1] == ["build"]:
        from tribuild.driver.noop.up_to_date import quick_build, simple

        args = simple(argv[1:])
        if args is not None:
            code = quick_build(args)
            return code if code is not None else _run(_build, args)
    args = parser().parse_args(argv)
    return _run(COMMANDS[args.command][2], args)


def _global_options(argv: list[str]) -> tuple[list[str], int | None]:
    """Take the options that come before the command (``-C DIR``, ``--color WHEN``,
    ``--version``) and act on them; the rest of ``argv``, and an exit code if the process is
    done (the version printed, or a usage error)."""
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        arg = rest[0]
        if arg == "--version":
            print(f"tribuild {_version()}")
            return rest[1:], EXIT_OK
        name, eq, value = arg.partition("=")
        if arg.startswith("-C") and len(arg) > 2:  # -CDIR, as make takes it
            name, eq, value = "-C", "=", arg[2:]
        if name not in ("-C", "--directory", "--color"):
            break  # not a global option (-h among them): argparse takes it
        del rest[0]
        if not eq:
            if not rest:
                print(f"tribuild: {name} needs a value", file=sys.stderr)
                return rest, EXIT_USAGE
            value = rest.pop(0)
        if name == "--color":
            if value not in terminal.CHOICES:
                print(
                    f"tribuild: --color must be auto, always or never, not {value!r}",
                    file=sys.stderr,
                )
                return rest, EXIT_USAGE
            terminal.choice = value
            continue
        try:
            os.chdir(value)
        except OSError as err:
            print(f"tribuild: -C {value}: {err.strerror}", file=sys.stderr)
            return rest, EXIT_USAGE
    return rest, None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tribuild")
    except PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown (not installed)"


def _run(command, args) -> int:
    """``command(args)``; a configuration or file system problem is printed (exit 2)."""
    from tribuild.config.load import ConfigError

    try:
        return command(args)
    except ConfigError as err:
        print(err.excerpted(), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        raise  # standard output closed by its reader (``entry``)
    except OSError as err:  # e.g. a cache or output folder that cannot be written
        from tribuild.base.printable import printable

        where = f": {err.filename}" if err.filename else ""
        print(printable(f"tribuild: error: {err.strerror or err}{where}"), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    entry()
