"""`tribuild build`: its options, then the result on stderr (diagnostics, failures, summary,
``--timing``, ``--explain``) and, for the dump options and ``--format``, on stdout.

Terms:
- *options*: ``DEFAULTS``, every option's value when the line does not give it, the one list:
  argparse's namespace takes them (``add_args``), and so does ``Options``, the arguments of a
  simple line built without argparse (``Options.of``, the no-op path's ``SimpleLine``).

Without ``--keep-going`` only the first failing target (in Tribuild.toml order) is shown in
full and the others are named; every target is built either way. Exit codes: 0 built,
1 some target failed (or the CPU kernels did not compile: ``driver.cpu_kernels``), 2
configuration (raised as ConfigError, printed by ``cli._run``).
"""

from __future__ import annotations

import os
import sys

from tribuild.cli import shared
from tribuild.cli.shared import say as _say
from tribuild.cli.shared import show_target
from tribuild.project import EXIT_OK, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from tribuild.driver.noop.up_to_date import SimpleLine

DEFAULTS: dict[str, object] = {
    "targets": [],
    "jobs": None,
    "opt_level": None,
    "timing": False,
    "trace_memory": False,
    "profile": None,
    "stop_after": None,
    "dump_ast": False,
    "dump_code": False,
    "dump_ir": False,
    "explain": False,
    "keep_going": False,
    "quiet": False,
    "format": "text",
    "force": False,
}


class Options:
    """The build's arguments without argparse: ``DEFAULTS``, with what ``given`` sets."""

    def __init__(self, **given: object) -> None:
        unknown = set(given) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"not an option of `tribuild build`: {sorted(unknown)}")
        for name, default in DEFAULTS.items():
            setattr(self, name, given.get(name, list(default) if default == [] else default))

    @classmethod
    def of(cls, line: SimpleLine) -> Options:
        """The arguments of the simple command line ``line``."""
        return cls(**vars(line))


def add_args(p: argparse.ArgumentParser) -> None:
    shared.add_targets(p)
    p.add_argument(
        "-j",
        "--jobs",
        type=shared.jobs,
        help="processes building at once; 0 = one per CPU (default: [project] jobs)",
    )
    shared.add_opt_level(p)
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
        help="json: the result as one object on stdout (docs/output.md); github: GitHub "
        "Actions annotations on stdout (both imply --quiet's progress)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite files at output paths that tribuild did not write (refused otherwise)",
    )
    p.set_defaults(**DEFAULTS)


def run(args) -> int:
    from tribuild.cli import formats
    from tribuild.config.problems import ConfigError

    try:
        return _build(args)
    except ConfigError as err:  # the document still (json, github), for whoever reads it
        sys.stdout.write(formats.config_document(err, args.format, "build", shared.version()) or "")
        raise  # and the text on stderr, exit 2 (``cli._run``)


def _build(args) -> int:
    from tribuild.cli import formats
    from tribuild.driver import dump, progress
    from tribuild.driver.build import Request, build
    from tribuild.driver.outputs import why_kept

    project = shared.project()
    request = Request.of(
        project,
        targets=tuple(args.targets),
        jobs=args.jobs,
        opt_level=args.opt_level,
        stop_after=_stop_after(args),
        keep_going=args.keep_going,
        timing=args.timing,
        trace_memory=args.trace_memory,
        force=args.force,
    )
    show = progress.choose(args.quiet or args.format != "text")
    if args.profile:
        result = _profiled(args.profile, lambda: build(project, request, show, _say))
    else:
        result = build(project, request, show, _say)
    _print_failures(result, args.keep_going)
    if args.dump_code:
        for rel in sorted(result.generated):
            sys.stdout.write(f"# ==> {rel} <==\n{result.generated[rel].decode()}")
    if args.dump_ast:
        sys.stdout.write(dump.ast_text(result))
    if args.dump_ir:
        sys.stdout.write(dump.ir_text(project, result))
    if args.explain:
        for rel, why in sorted(result.explain.items()):
            _say(f"{rel}: written")
            for line in why:
                _say(f"  {line}")
    if result.cpu_kernels is not None and result.cpu_kernels.message is not None:
        _say(result.cpu_kernels.message)  # shown even with -q, as failures are
    if not args.quiet or result.failed or result.kernels_failed:
        _say(summary(result))
    for rel in result.report.kept if result.report else ():  # shown even with -q
        path = os.path.relpath(os.path.join(result.out_dir, rel))
        why = why_kept(result.out_dir, rel)
        _say(f"kept {path}: no target makes it any more, but {why}; delete it if it is not yours")
    if result.remote is not None and (line := result.remote.link.warning_line()):
        _say(line)  # one line per build, however many targets it concerned
    if result.timing is not None:
        _say(result.timing.text())
    if args.format == "json":
        import json

        json.dump(formats.build_json(result), sys.stdout, indent=1)
        print()
    elif args.format == "github":
        sys.stdout.write(formats.github(unique_diagnostics(result), result.sources))
    return EXIT_USER if result.failed or result.kernels_failed else EXIT_OK


def unique_diagnostics(result) -> list:
    """The diagnostics of every target, each once (targets that share a file share its)."""
    return list(dict.fromkeys(d for target in result.targets for d in target.diagnostics))


def _stop_after(args) -> str | None:
    if args.dump_ast:
        return args.stop_after or "parse"
    if args.dump_code or args.dump_ir:
        return args.stop_after or "codegen"
    return args.stop_after


def _print_failures(result, keep_going: bool) -> None:
    failed = result.failed
    shown: set = set()  # a diagnostic of a file several targets share is printed once
    for target in failed if keep_going else failed[:1]:
        show_target(target, result.sources, shown)
    if not keep_going and len(failed) > 1:
        others = ", ".join(t.name for t in failed[1:])
        _say(f"also failed: {others} (--keep-going shows every failure)")


def summary(result) -> str:
    n = len(result.targets)
    head = f"{n} target{'s' * (n != 1)}"
    if result.failed:
        names = ", ".join(t.name for t in result.failed)
        return f"build failed: {len(result.failed)} of {head} failed ({names})"
    if result.kernels_failed:
        return f"build failed: {head} built, the CPU kernels did not compile"
    if result.report is None:
        return f"stopped early: {head} processed"
    report = result.report
    parts = [f"{len(report.written)} written", f"{len(report.unchanged)} unchanged"]
    if report.removed:
        parts.append(f"{len(report.removed)} stale removed")
    if report.kept:
        parts.append(f"{len(report.kept)} stale kept (not as tribuild wrote them)")
    return f"built {head}: {', '.join(parts)}"


def _profiled(path: str, fn):
    import cProfile
    import pstats

    profile = cProfile.Profile()
    try:
        return profile.runcall(fn)
    finally:
        profile.dump_stats(path)
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(20)
        _say(f"profile written to {path} (open with python -m pstats or snakeviz)")
