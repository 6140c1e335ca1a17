"""`tribuild cache ACTION`: the cache folder's stats, clear, prune and validate
(``tribuild.driver.cache``), and the remote cache's check (``tribuild.driver.remote.check``).
Exit codes: 0 done, 1 corrupt generations found or the remote check failed, 2 usage."""

from __future__ import annotations

import sys

from tribuild.cli import shared
from tribuild.project import EXIT_OK, EXIT_USAGE, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("stats", "clear", "prune", "validate", "remote-check"))
    p.add_argument(
        "--days", type=shared.days, help="prune: delete what was not used for DAYS days (0 or more)"
    )


def run(args) -> int:
    from tribuild.driver import cache

    project = shared.project()
    if args.action == "prune" and args.days is None:
        print("tribuild cache prune: --days N is required", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "remote-check":
        from tribuild.driver.remote.check import remote_check

        ok, lines = remote_check(project.config.remote if project.config else None)
        print("\n".join(lines))
        return EXIT_OK if ok else EXIT_USER
    note = shared.say
    if args.action == "stats":
        print(cache.project_stats(project, note))
    elif args.action == "clear":
        print(f"deleted {cache.project_clear(project, note)} files", file=sys.stderr)
    elif args.action == "prune":
        gone = cache.project_prune(project, args.days, note)
        print(f"pruned {len(gone)} generations", file=sys.stderr)
    else:
        bad = cache.project_validate(project, note)
        for sid, problem in bad:
            print(f"generation {sid}: {problem}; deleted", file=sys.stderr)
        print(f"validated: {len(bad)} corrupt generations", file=sys.stderr)
        return EXIT_USER if bad else EXIT_OK
    return EXIT_OK
