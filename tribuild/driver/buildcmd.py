"""`tribuild build` on the command line: from parsed arguments to a driver request, and the
result to stderr (diagnostics, failures, summary, ``--timing``, ``--explain``) and, for the
dump options, to stdout.

Without ``--keep-going`` only the first failing target (in Tribuild.toml order) is shown in
full and the others are named; every target is built either way. Exit codes: 0 built,
1 some target failed, 2 configuration (raised as ConfigError, printed by the CLI).
"""

from __future__ import annotations

import os
import sys

from tribuild import terminal
from tribuild.driver import formats, progress
from tribuild.driver.build import Request, build
from tribuild.driver.outputs import why_kept
from tribuild.project import EXIT_OK, EXIT_USER


def run(project, args) -> int:
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
        _dump_ast(result)
    if args.dump_ir:
        _dump_ir(project, result)
    if args.explain:
        for rel, why in sorted(result.explain.items()):
            _say(f"{rel}: written")
            for line in why:
                _say(f"  {line}")
    if not args.quiet or result.failed:
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
    return EXIT_USER if result.failed else EXIT_OK


def unique_diagnostics(result) -> list:
    """The diagnostics of every target, each once (targets that share a file share its)."""
    return list(dict.fromkeys(d for target in result.targets for d in target.diagnostics))


def _stop_after(args) -> str | None:
    if args.dump_ast:
        return args.stop_after or "parse"
    if args.dump_code or args.dump_ir:
        return args.stop_after or "codegen"
    return args.stop_after


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_failures(result, keep_going: bool) -> None:
    failed = result.failed
    shown: set = set()  # a diagnostic of a file several targets share is printed once
    for target in failed if keep_going else failed[:1]:
        show_target(target, result.sources, shown)
    if not keep_going and len(failed) > 1:
        others = ", ".join(t.name for t in failed[1:])
        _say(f"also failed: {others} (--keep-going shows every failure)")


def show_target(target, sources, shown: set | None = None) -> None:
    """A target's diagnostics (with source excerpts), or the traceback of a bug, on stderr;
    those in ``shown`` (printed for an earlier target) are skipped, and added to it."""
    from tribuild.diagnostics_render import render_text

    shown = set() if shown is None else shown
    if target.error is not None:
        _say(f"error: internal error while building `{target.name}` (a bug in tribuild):")
        _say(target.error.rstrip())
    for diag in target.diagnostics:
        if diag not in shown:
            shown.add(diag)
            _say(render_text(diag, sources, color=terminal.color(sys.stderr)))


def summary(result) -> str:
    n = len(result.targets)
    head = f"{n} target{'s' * (n != 1)}"
    if result.failed:
        names = ", ".join(t.name for t in result.failed)
        return f"build failed: {len(result.failed)} of {head} failed ({names})"
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


def _dump_ast(result) -> None:
    import pprint

    from tribuild.queries.syntax import item_ast, item_index

    db = result.sources.db
    for path in result.inputs:
        for entry in item_index(db, path):
            tree = item_ast(db, path, entry.id).item
            sys.stdout.write(f"# ==> {path}:{entry.id} <==\n{pprint.pformat(tree, width=100)}\n")


def _dump_ir(project, result) -> None:
    """The optimised IR of every instance of each target that built, in target order."""
    from tribuild.ir.text import target_ir

    configured = {t.name: t for t in project.config.targets}
    for target in result.targets:
        if not target.failed:
            sys.stdout.write(
                target_ir(result.sources.db, configured[target.name], result.opt_level)
            )
