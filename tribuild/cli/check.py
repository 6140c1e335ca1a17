"""`tribuild check`: diagnostics of .tri files as text on stderr, or for machines on stdout
(``--format``: ``formats``). Exit codes: 0 no errors, 1 errors, 2 configuration."""

from __future__ import annotations

import sys

from tribuild import terminal
from tribuild.cli import shared
from tribuild.project import EXIT_OK, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from tribuild.driver.check import CheckResult


def add_args(p: argparse.ArgumentParser) -> None:
    shared.add_paths(p)
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


def run(args) -> int:
    import json

    from tribuild.cli import formats
    from tribuild.config.problems import ConfigError
    from tribuild.diagnostics_render import render_text
    from tribuild.driver.check import check

    try:
        result = check(shared.project(), tuple(args.paths))
    except ConfigError as err:  # the document still, for the editor or annotator reading it
        sys.stdout.write(formats.config_document(err, args.format, "check", shared.version()) or "")
        raise  # and the text on stderr, exit 2 (``cli._run``)
    if args.format in ("json", "sarif"):
        if args.format == "json":
            data = formats.check_json(result)
        else:
            data = formats.sarif(result.diagnostics, result.sources, shared.version())
        json.dump(data, sys.stdout, indent=1)
        print()
    elif args.format == "github":
        sys.stdout.write(formats.github(result.diagnostics, result.sources))
        print(summary(result), file=sys.stderr)
    else:
        color = terminal.color(sys.stderr)
        for diag in result.diagnostics:
            print(render_text(diag, result.sources, color=color), file=sys.stderr)
        print(summary(result), file=sys.stderr)
    if args.stats:
        print(
            f"queries: {result.executed} executed, {result.validated} validated, "
            f"{result.hits} reused (store: {result.store})",
            file=sys.stderr,
        )
    return EXIT_USER if result.errors else EXIT_OK


def summary(result: CheckResult) -> str:
    files = f"{len(result.files)} file{'s' * (len(result.files) != 1)}"
    if result.targets:
        files += f" and {result.targets} target{'s' * (result.targets != 1)}"
    if not result.errors:
        return f"checked {files}: no errors"
    return f"checked {files}: {result.errors} error{'s' * (result.errors != 1)}"
