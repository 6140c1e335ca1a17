"""One run of tribuild over a project: where it is, its persistent database, saving it back.

Terms:
- *project*: a root folder, the .tri files to consider (from Tribuild.toml's sources or the
  paths on the command line) and, when there is a Tribuild.toml, its Config, with the
  *config source*: the digest of the file's bytes that were read and the table parsed from
  them, which the build manifest records. When the manifest in the default cache folder
  recorded the same digest, its table is validated instead of parsing the file
  (``config.read_config``).
- *salt*: the digest of tribuild's own source plus the options that change results; it keys
  the persistent store, so a store written by another version or other options is ignored.
- *salt record*: ``<cache dir>/salt.json``, the package signature (``manifest``) of
  tribuild's source with the ``package_hash`` read from those files, so a build whose
  tribuild has not changed stats its files instead of reading and hashing them all. The
  record is trusted only for an identical signature, and is written only when every file
  was last changed over ``RACY_NS`` before the signature was taken: a file changed again
  later, even within one tick of the file system's clock, has a newer ctime.
"""

from __future__ import annotations

import json
import os

from tribuild.base.files import OWN_FILE_BYTES, read_regular
from tribuild.base.gcpause import held
from tribuild.base.hashing import digest
from tribuild.config.load import Config, read_config
from tribuild.driver.noop import manifest
from tribuild.engine import Database, package_hash
from tribuild.project import CONFIG_FILE, DEFAULT_CACHE_DIR, PACKAGE_DIR, find_project_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SALT_RECORD = "salt.json"
RACY_NS = 2_000_000_000
_DIGESTS: dict[str, str] = {}  # package folder -> its package_hash, once per process


class Project:
    __slots__ = ("root", "config", "cache_dir", "config_source")

    def __init__(
        self,
        root: str,
        config: Config | None,
        cache_dir: str,
        config_source: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        self.root, self.config, self.cache_dir = root, config, cache_dir
        self.config_source = config_source

    @property
    def configured(self) -> Config:
        """``config``, for the code that runs only in a project that has one (``build.select``
        refuses one without)."""
        if self.config is None:
            raise AssertionError("a project without Tribuild.toml got past build.select")
        return self.config

    @property
    def out_dir(self) -> str:
        """The output folder (``out`` of Tribuild.toml; the root without one)."""
        return os.path.join(self.root, self.config.out) if self.config else self.root

    @classmethod
    def discover(cls, start: str) -> "Project":
        """The project around ``start``: the nearest Tribuild.toml upward (loaded and validated;
        raises ConfigError), else ``start`` itself with no config."""
        root = find_project_root(start)
        if root is None:
            folder = os.path.abspath(start)
            return cls(folder, None, os.path.join(folder, DEFAULT_CACHE_DIR))
        default_cache = os.path.join(root, DEFAULT_CACHE_DIR)

        def recorded(data: bytes) -> dict[str, Any] | None:
            return manifest.recorded_config(default_cache, digest(data))

        config, data, table = read_config(os.path.join(root, CONFIG_FILE), recorded)
        return cls(
            config.root, config, os.path.join(config.root, config.cache_dir), (digest(data), table)
        )


def salt(options: str = "", cache_dir: str | None = None, record: bool = True) -> str:
    return f"{package_digest(cache_dir, record=record)}:{options}"


def package_digest(
    cache_dir: str | None = None, package: str = PACKAGE_DIR, record: bool = True
) -> str:
    """``package_hash(package)``, from the salt record in ``cache_dir`` when it holds the
    package's signature (recorded there when it did not, if ``record``: the `cache`
    commands only read it); once per process."""
    if package not in _DIGESTS:
        taken, rows = manifest.package_signature(package)
        path = cache_dir and os.path.join(cache_dir, SALT_RECORD)
        digest = _recorded(path, package, rows) if path else None
        if digest is None:
            digest = package_hash(package)
            if record and path and all(max(row[2], row[3]) < taken - RACY_NS for row in rows):
                _record(path, {"package": package, "files": rows, "digest": digest})
        _DIGESTS[package] = digest
    return _DIGESTS[package]


def _recorded(path: str, package: str, rows: list[list[Any]]) -> str | None:
    try:
        data = json.loads(read_regular(path, OWN_FILE_BYTES))
        if data["package"] == package and data["files"] == rows and isinstance(data["digest"], str):
            return data["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _record(path: str, data: dict[str, Any]) -> None:
    from tribuild.engine import write_atomic

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, json.dumps(data, separators=(",", ":")).encode())
    except OSError:
        pass  # a read-only cache folder: the next process hashes the files again


def open_database(project: Project, options: str = "") -> Database:
    """The project's database as the last run left it (empty if there is no valid store);
    kept until the process ends in a process that ends with ``os._exit`` (``gcpause``)."""
    db: Database = held(Database.load(project.cache_dir, salt(options, project.cache_dir)))
    return db


def save_database(db: Database, project: Project, options: str = "") -> None:
    db.save(project.cache_dir, salt(options, project.cache_dir))
