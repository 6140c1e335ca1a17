"""`tribuild lsp`: the language server on stdio (``tribuild.lsp``).

Exit codes: 0 when the client says exit after shutdown, 1 when it says exit without it or
closes the stream (the protocol's rule); 2 when pygls is not installed (the ``lsp`` extra).
"""

from __future__ import annotations

import sys

from tribuild.cli import shared

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    shared.add_debounce(p, "an edit for the next one before checking")
    p.add_argument(
        "--stdio", action="store_true", help="serve on stdin and stdout (the only transport)"
    )


def run(args) -> int:
    try:
        from tribuild.lsp.server import serve
    except ModuleNotFoundError as err:
        if err.name not in ("pygls", "lsprotocol"):
            raise
        print(
            f"tribuild lsp: {err}: install the language server's dependencies with "
            "`pip install 'tribuild[lsp]'`",
            file=sys.stderr,
        )
        return 2
    return serve(max(args.debounce, 0.0) / 1e3)
