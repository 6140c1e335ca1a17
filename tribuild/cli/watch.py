"""`tribuild watch`: arguments to a ``Watcher`` and its screen (``tribuild.watch``).

Exit codes: 0 stopped (Ctrl-C or SIGTERM), 2 configuration (raised as ConfigError, printed by
``cli._run``).
"""

from __future__ import annotations

from tribuild.cli import shared

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    shared.add_targets(p)
    shared.add_opt_level(p)
    shared.add_debounce(p, "an event for the next one")
    p.add_argument(
        "--on-success",
        metavar="CMD",
        help="a shell command to run (in the project folder) after each good rebuild",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON event per line on stdout, for editors and tools",
    )


def run(args) -> int:
    from tribuild.watch import Options, Watcher, choose_screen

    options = Options(
        tuple(args.targets), args.opt_level, max(args.debounce, 0.0) / 1e3, args.on_success
    )
    watcher = Watcher(shared.project(), options, choose_screen(args.json))
    watcher.run()  # stops on Ctrl-C, and on SIGTERM (``cli.Terminated``) as cleanly
    return 0
