"""The command line: one module per subcommand (``tribuild.cli.<command>``: its options in
``add_args``, its handler in ``run``), which parse and print; the work is done in the driver,
the watcher and the language server.

Terms:
- *command table*: ``COMMANDS``, each command's name and one-line help, in ``--help`` order.
- *global options*: ``-C DIR``, ``--color WHEN`` and ``--version``, taken before the command
  without argparse (``_global_options``), so that the no-op path has none.
- *no-op path*: a plain `tribuild build` line answered from the manifest
  (``tribuild.driver.noop.up_to_date``) before argparse, the engine or the compiler is
  imported; a simple line that is not a no-op is built without argparse too
  (``build.Options.of``).

What the rest may use: ``entry`` (the console script, ``python -m tribuild``), ``main``
(a command line to its exit code) and ``parser``. Exit codes: 0 success, 1 errors in the
user's program (diagnostics printed on stderr), 2 usage or configuration errors.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module

from tribuild import terminal
from tribuild.project import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import ModuleType


def _control(ch: str) -> bool:
    """A control character other than tab (C0, DEL and C1: what ``base.printable`` escapes)."""
    return (ch < " " and ch != "\t") or "\x7f" <= ch < "\xa0"


_GC_THRESHOLDS = (50_000, 20, 100)  # Python's defaults: (700, 10, 10)

COMMANDS = {
    "build": "build the targets of Tribuild.toml into its output folder",
    "compile": "compile one layer of one file into a module (a make or ninja rule)",
    "check": "report diagnostics for .tri files; exit 1 if any error",
    "clean": "delete the outputs tribuild wrote (not the cache)",
    "init": "write a starter Tribuild.toml and models/mlp.tri",
    "graph": "print the file graph (or --queries: the query graph) as dot or JSON",
    "explain": "why an output was last written: the chain back to the changed input",
    "cache": "the persistent cache: stats, clear, prune --days N, validate, remote-check",
    "watch": "build, then rebuild on every change of the sources or Tribuild.toml",
    "lsp": "a Language Server Protocol server on stdio, for editors",
    "fmt": "lay out .tri files (indentation, blank lines); --check to only report",
}


def command(name: str) -> ModuleType:
    """The module of the command ``name`` (imported on first use)."""
    return import_module(f"tribuild.cli.{name}")


def parser() -> argparse.ArgumentParser:
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
    for name, help_text in COMMANDS.items():
        command(name).add_args(subs.add_parser(name, help=help_text, description=help_text))
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
    `tribuild build` line (``up_to_date.simple``) is answered from the manifest when nothing
    changed, and otherwise built without argparse."""
    argv = sys.argv[1:] if argv is None else argv
    for position, arg in enumerate(argv, 1):
        if any(_control(ch) for ch in arg):  # echoed by an error it would reach the terminal
            from tribuild.base.printable import printable

            print(
                printable(
                    f"tribuild: error: argument {position} ({arg!r}) holds a control "
                    "character: no file, target or value tribuild takes has one"
                ),
                file=sys.stderr,
            )
            return EXIT_USAGE
    argv, code = _global_options(argv)
    if code is not None:
        return code
    if argv[:1] == ["build"]:
        from tribuild.driver.noop.up_to_date import quick_build, simple

        line = simple(argv[1:])
        if line is not None:
            code = quick_build(line)
            if code is not None:
                return code
            build = command("build")
            return _run(build.run, build.Options.of(line))
    misplaced = _misplaced_global(argv)
    if misplaced is not None:
        print(misplaced, file=sys.stderr)
        return EXIT_USAGE
    args = parser().parse_args(argv)
    return _run(command(args.command).run, args)


GLOBAL_OPTIONS = ("-C", "--directory", "--color")


def _misplaced_global(argv: list[str]) -> str | None:
    """The usage error of a global option written after the command (`tribuild check -C
    p2`), which argparse reports as "unrecognized arguments" without saying where it goes."""
    if not argv or argv[0] not in COMMANDS:
        return None
    for i, arg in enumerate(argv[1:], 1):
        if arg == "--":
            return None
        name = arg.partition("=")[0]
        if name in GLOBAL_OPTIONS or (arg.startswith("-C") and not arg.startswith("--")):
            fixed = (
                [arg, *argv[i + 1 : i + 2]] if "=" not in arg and arg in GLOBAL_OPTIONS else [arg]
            )
            rest = argv[1:i] + argv[i + len(fixed) :]
            line = " ".join(["tribuild", *fixed, argv[0], *rest])
            return (
                f"tribuild: {name if name in GLOBAL_OPTIONS else '-C'} is a global option: it "
                f"comes before the command\n  help: {line}"
            )
    return None


def _global_options(argv: list[str]) -> tuple[list[str], int | None]:
    """Take the options that come before the command (``-C DIR``, ``--color WHEN``,
    ``--version``) and act on them; the rest of ``argv``, and an exit code if the process is
    done (the version printed, or a usage error)."""
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        arg = rest[0]
        if arg == "--version":
            from tribuild.cli.shared import version

            print(f"tribuild {version()}")
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


def _run(handler, args) -> int:
    """``handler(args)``; a configuration or file system problem is printed (exit 2)."""
    from tribuild.config.load import ConfigError

    try:
        return handler(args)
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
