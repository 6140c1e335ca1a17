"""`tribuild watch` on the command line: arguments to a ``Watcher`` and its screen.

Exit codes: 0 stopped (Ctrl-C or SIGTERM), 2 configuration (raised as ConfigError, printed by
the CLI).
"""

from __future__ import annotations

from tribuild.project import OPT_LEVELS


def add_args(p) -> None:
    p.add_argument("targets", nargs="*", help="targets of Tribuild.toml (default: all)")
    p.add_argument(
        "-O",
        dest="opt_level",
        choices=OPT_LEVELS,
        metavar="LEVEL",
        help="-O0, -O1, -O2, -O3 or -Os (default: [project] opt_level)",
    )
    p.add_argument(
        "--debounce",
        type=float,
        default=50.0,
        metavar="MS",
        help="wait this long after an event for the next one (default: 50 ms)",
    )
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


def run(project, args) -> int:
    from tribuild.watch import screen as watch_screen
    from tribuild.watch.loop import Options, Watcher

    options = Options(
        tuple(args.targets), args.opt_level, max(args.debounce, 0.0) / 1e3, args.on_success
    )
    watcher = Watcher(project, options, watch_screen.choose(args.json))
    watcher.run()  # stops on Ctrl-C, and on SIGTERM (``cli.Terminated``) as cleanly
    return 0
