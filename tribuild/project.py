"""Facts about a tribuild project that the no-op path and the full path share.

Standard library only, and nothing heavier than ``os``: the no-op path
(``driver.noop``) imports this module, and its whole start-up is budgeted
(tests/driver/test_noop.py). Everything else imports these names from here, so that
each fact is stated once.
"""

from __future__ import annotations

import os

CONFIG_FILE = "Tribuild.toml"
"""The project file; the nearest one at or above the working folder marks the project root."""

DEFAULT_CACHE_DIR = ".tribuild-cache"
"""The cache folder, relative to the project root, when ``[cache] dir`` is not set."""

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
"""tribuild's own source folder: its files' signature salts the store and the manifest."""

OPT_LEVELS = ("0", "1", "2", "3", "s")
INT64_LIMIT = 2**63  # integers, as .tri literals and as arguments, lie in [-2**63, 2**63)
"""Optimization levels as the command line spells them; Tribuild.toml writes 0-3 as integers."""

KEYWORDS = frozenset(
    ("import", "from", "layer", "fn", "let", "return", "if", "else", "for", "in", "true", "false")
)
"""The .tri language's reserved words: no layer, target argument or name may be one."""

EXIT_OK = 0
EXIT_USER = 1
"""Errors in the user's program: diagnostics were printed."""
EXIT_USAGE = 2
"""A bad command line or Tribuild.toml."""
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE
EXIT_TERMINATED = 143  # 128 + SIGTERM

SCHEMA_VERSION = 1
"""The version of the JSON documents tribuild prints (``check``/``build --format json``, the
events of ``watch --json``; docs/output.md). A new field keeps it; a field removed or changed
in meaning bumps it."""


def job_count(jobs: int) -> int:
    """Processes for a ``jobs`` value (Tribuild.toml, ``--jobs``, ``tribuild.build``): 0 is
    one per CPU."""
    return jobs or os.cpu_count() or 1


def find_project_root(start_dir: str | os.PathLike[str]) -> str | None:
    """The nearest folder at or above ``start_dir`` that holds a Tribuild.toml."""
    folder = os.path.abspath(start_dir)
    while not os.path.exists(os.path.join(folder, CONFIG_FILE)):  # a folder: reported when read
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return folder
