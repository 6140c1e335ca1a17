"""One run of tribuild over a project: where it is, its persistent database, saving it back.

Terms:
- *project*: a root folder, the .tri files to consider (from Tribuild.toml's sources or the
  paths on the command line) and, when there is a Tribuild.toml, its Config.
- *salt*: the digest of tribuild's own source plus the options that change results; it keys
  the persistent store, so a store written by another version or other options is ignored.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import tribuild
from tribuild.config import FILENAME, Config, find_project_root, load_config
from tribuild.engine import Database
from tribuild.engine.fingerprint import package_hash

DEFAULT_CACHE = ".tribuild-cache"


@dataclass
class Project:
    root: str
    config: Config | None
    cache_dir: str

    @classmethod
    def discover(cls, start: str) -> "Project":
        """The project around ``start``: the nearest Tribuild.toml upward (loaded and validated;
        raises ConfigError), else ``start`` itself with no config."""
        root = find_project_root(start)
        if root is None:
            return cls(os.path.abspath(start), None, os.path.join(os.path.abspath(start), DEFAULT_CACHE))
        config = load_config(os.path.join(root, FILENAME))
        return cls(config.root, config, os.path.join(config.root, config.cache_dir))


def salt(options: str = "") -> str:
    return f"{package_hash(Path(tribuild.__file__).parent)}:{options}"


def open_database(project: Project, options: str = "") -> Database:
    """The project's database as the last run left it (empty if there is no valid store)."""
    return Database.load(project.cache_dir, salt(options))


def save_database(db: Database, project: Project, options: str = "") -> None:
    db.save(project.cache_dir, salt(options))
