"""Tribuild.toml: load it, validate it, and explain every mistake in it.

Terms:
- *root*: the folder holding Tribuild.toml; every relative path in the file is relative to it.
- *target*: one model to build: an *entry* ``file.tri:Layer`` (the layer to instantiate),
  its construction *args* and an optional example *input* shape.
- Paths in a Config are posix and normalised. ``sources`` and each target's ``entry_path`` are
  relative to the root and never leave it; ``out`` and ``cache_dir`` are relative to the root
  unless written absolute, so ``os.path.join(config.root, config.out)`` is the folder.
  "Never leave the root" is checked on the text of the path (``..`` and absolute paths are
  refused) and on where it leads: a symlink inside the root that points elsewhere is refused.

``load_config`` either returns a complete Config or raises ConfigError with every problem
found (see ``config_problems``); the schema is in docs and in ``STARTER_TOML``. ``read_config``
may be given the *known table* of the file's bytes (the table an earlier process parsed from
exactly those bytes, kept by the build manifest): it is validated as a fresh parse is, and
problems are placed in the text as for a fresh parse, so only the TOML parser is skipped.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import stat
import sys
from collections.abc import Callable
from ntpath import isabs as _windows_isabs

from tribuild.base.depnames import unwritable
from tribuild.base.record import record
from tribuild.config.locate import Locator, Path
from tribuild.config.problems import ConfigError, Problem, syntax_problem
from tribuild.config.remote import KEYS as _REMOTE_KEYS
from tribuild.config.remote import RemoteSettings, read_settings
from tribuild.config.schema import Checker
from tribuild.diagnostics import closest
from tribuild.project import (
    CONFIG_FILE,
    DEFAULT_CACHE_DIR,
    INT64_LIMIT,
    KEYWORDS,
    OPT_LEVELS,
    job_count,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Config",
    "ConfigError",
    "Problem",
    "STARTER_TOML",
    "Target",
    "load_config",
    "resolves_inside",
    "write_starter",
]

ArgValue = int | float | bool | str | tuple["ArgValue", ...]

_TOP_KEYS = ("project", "cache", "targets")
_PROJECT_KEYS = ("name", "sources", "out", "opt_level", "jobs")
_CACHE_KEYS = ("dir", "max_size_mb") + _REMOTE_KEYS
_TARGET_KEYS = ("entry", "args", "input")
_TARGET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")  # a leading - reads as an option
MAX_TARGET_NAME = 128  # with ``.NAME.py.XXXXXXXX.tmp`` well within a file name's 255 bytes
SHADOWED_MODULES = frozenset(sys.stdlib_module_names) | {
    "torch",
    "triton",
    "tribuild",
    "numpy",
    "sitecustomize",  # not in stdlib_module_names, yet Python imports them at start
    "usercustomize",
}
"""Target names refused: ``out/NAME.py`` would be imported instead of that module by the
generated modules in the folder (Python puts a script's folder first on ``sys.path``)."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARG_EXPECTED = "a 64-bit integer, a finite float, a boolean, a string or an array of those"
# required key -> the help shown when it is missing
_REQUIRED_TOP = {"project": 'add a [project] section with a name = "..." line'}
_REQUIRED_PROJECT = {"name": 'add a line name = "my-project"'}
_REQUIRED_TARGET = {"entry": 'add a line entry = "models/net.tri:Net" (file:Layer)'}


@record
class Target:
    name: str
    entry_path: str
    entry_layer: str
    args: tuple[tuple[str, ArgValue], ...]
    input: tuple[int, ...] | None


@record
class Config:
    root: str
    name: str
    sources: tuple[str, ...]
    out: str
    opt_level: str
    jobs: int
    cache_dir: str
    cache_max_bytes: int | None
    targets: tuple[Target, ...]
    path: str
    remote: RemoteSettings = RemoteSettings()  # [cache] remote*: the shared cache, if any


def load_config(path: str | os.PathLike[str]) -> Config:
    """The validated configuration in ``path``; raises ConfigError listing every problem."""
    return read_config(path)[0]


def read_config(
    path: str | os.PathLike[str], known: Callable[[bytes], dict | None] | None = None
) -> tuple[Config, bytes, dict]:
    """``load_config``, with the file's bytes and their table. ``known(data)`` gives the
    known table of ``data``, or None: then the text is parsed."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        problem = Problem(path, None, None, "", f"cannot read: {error.strerror}")
        raise ConfigError([problem]) from None
    try:
        text = data.decode("utf-8-sig")  # a byte order mark, as some editors write, is no key
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError([Problem(path, line, 1, "", "invalid TOML: not UTF-8 text")]) from None
    table = known(data) if known is not None else None
    if table is None:
        import tomllib

        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError([syntax_problem(path, text, error)]) from None
    reader = _Reader(Checker(path, _LazyLocator(text)), os.path.dirname(os.path.abspath(path)))
    config = reader.config(table, path)
    if reader.c.problems:
        raise ConfigError(reader.c.problems)
    return config, data, table


class _LazyLocator:
    """The Locator of ``text``, made when a problem is first placed: a valid file needs none."""

    __slots__ = ("text", "_locator")

    def __init__(self, text: str) -> None:
        self.text = text
        self._locator: Locator | None = None

    def key(self, path: Path) -> tuple[int, int]:
        return self._made().key(path)

    def value(self, path: Path) -> tuple[int, int]:
        return self._made().value(path)

    def _made(self) -> Locator:
        if self._locator is None:
            self._locator = Locator(self.text)
        return self._locator


def _starter_toml(name: str) -> str:
    quoted = (
        '"'
        + "".join(
            f"\\u{ord(ch):04x}" if ch in '"\\' or ord(ch) < 0x20 or ch == "\x7f" else ch
            for ch in name
        )
        + '"'
    )
    return f"""\
# Tribuild.toml: what `tribuild build` compiles. Paths are relative to this file's folder.

[project]
name = {quoted}
sources = ["models"]          # folders searched for .tri files
out = "build"                 # where generated modules and kernels go
opt_level = 2                 # 0, 1, 2, 3 or "s"
jobs = 0                      # processes building at once; 0 = one per CPU

[cache]
dir = ".tribuild-cache"       # reused by later builds, safe to delete
max_size_mb = 512

# One table per model to build: [targets.NAME] with NAME made of letters, digits, _ and -.
[targets.mlp]
entry = "models/mlp.tri:MLP"  # file:Layer, the layer to instantiate
input = [1, 784]              # an example input shape
# args = {{ hidden = 256 }}    # construction arguments: numbers, booleans, strings, arrays
"""


STARTER_TOML = _starter_toml("my-project")
"""The Tribuild.toml that `tribuild init` writes (with the project's own name)."""


def write_starter(folder: str | os.PathLike[str], name: str | None = None) -> str:
    """Create ``folder``/Tribuild.toml from the starter text; never overwrites one.

    ``name`` defaults to the folder's name. Raises FileExistsError when the file exists.
    Returns the path written.
    """
    path = os.path.join(os.path.abspath(folder), CONFIG_FILE)
    with open(path, "x", encoding="utf-8") as file:
        file.write(_starter_toml(name or os.path.basename(os.path.abspath(folder))))
    return path


class _Reader:
    """Reads one parsed Tribuild.toml into a Config, reporting problems to ``c``."""

    def __init__(self, checker: Checker, root: str) -> None:
        self.c = checker
        self.root = root

    def config(self, top: dict, path: str) -> Config:
        c = self.c
        c.table((), top, _TOP_KEYS, _REQUIRED_TOP)
        project = self._section(top, "project", _PROJECT_KEYS, _REQUIRED_PROJECT)
        cache = self._section(top, "cache", _CACHE_KEYS, {})
        where = ("project",)
        max_mb = c.get(cache, ("cache",), "max_size_mb", 512, self._positive_int)
        config = Config(
            root=self.root,
            name=c.get(project, where, "name", None, self._string),
            sources=c.get(project, where, "sources", (".",), self._sources),
            out=c.get(project, where, "out", "build", self._out),
            opt_level=c.get(project, where, "opt_level", "2", self._opt_level),
            jobs=job_count(c.get(project, where, "jobs", 0, self._jobs)),
            cache_dir=c.get(cache, ("cache",), "dir", DEFAULT_CACHE_DIR, self._folder),
            cache_max_bytes=max_mb * 1024 * 1024 if max_mb else None,
            targets=self._targets(top.get("targets", {})),
            path=os.path.abspath(path),
            remote=read_settings(c, cache),
        )
        if "dir" in cache and config.cache_dir and config.sources and config.out:
            self._cache_apart(config)
        return config

    def _cache_apart(self, config: Config) -> None:
        """Refuse a cache folder that is the root or holds it, holds a source folder, or is,
        holds or lies in the output folder: the build writes ``build-manifest.json`` and
        ``explain.json`` there and ``cache clear`` deletes what it takes for its own files
        (``dir = "."`` overwrote a user's files of those names)."""
        real = os.path.realpath
        cache = real(os.path.join(self.root, config.cache_dir))
        out = real(os.path.join(self.root, config.out))
        why = None
        if _within(real(self.root), cache):
            why = "is the project root or holds it"
        elif any(_within(real(os.path.join(self.root, s)), cache) for s in config.sources):
            why = "holds a source folder"
        elif _within(out, cache) or _within(cache, out):
            why = "is, holds or lies in the output folder"
        if why is not None:
            where = ("cache", "dir")
            self.c.report(
                where,
                f"cache folder `{config.cache_dir}` {why}: tribuild writes and deletes files "
                "of its own there",
                self.c.locator.value(where),
                expected=f'a folder of its own, such as "{DEFAULT_CACHE_DIR}"',
            )

    def _section(
        self, top: dict, name: str, allowed: tuple[str, ...], required: dict[str, str]
    ) -> dict:
        """The table ``top[name]`` ({} when absent or not a table, which is reported)."""
        if name not in top:
            return {}
        return self.c.table((name,), top[name], allowed, required) or {}

    def _targets(self, value: Any) -> tuple[Target, ...]:
        targets = self.c.expect(("targets",), value, lambda v: isinstance(v, dict), "a table")
        found = [self._target(name, table) for name, table in (targets or {}).items()]
        return tuple(t for t in found if t is not None)  # None: reported, the config fails

    def _target(self, name: str, value: Any) -> Target | None:
        where = ("targets", name)
        if len(name) > MAX_TARGET_NAME:
            self.c.report(
                where,
                f"target name `{name[:20]}...` is {len(name)} characters long, more than "
                f"{MAX_TARGET_NAME}: output files are named after it",
                self.c.locator.key(where),
                expected=f"at most {MAX_TARGET_NAME} characters",
            )
        elif name in SHADOWED_MODULES:
            self.c.report(
                where,
                f"target name `{name}` would shadow the module `{name}`: its output "
                f"`{name}.py` would be imported in its place by every generated module of the "
                "output folder",
                self.c.locator.key(where),
                expected="a name that is no module of Python's or of what generated code imports",
            )
        elif not _TARGET_NAME.fullmatch(name):
            why = " (the command line would take it for an option)" if name[:1] == "-" else ""
            self.c.report(
                where,
                f"invalid target name `{name}`: use letters, digits, `_` and "
                f"`-`, not `-` first{why}",
                self.c.locator.key(where),
                expected="letters, digits, `_` and `-`, not `-` first",
            )
        table = self.c.table(where, value, _TARGET_KEYS, _REQUIRED_TARGET)
        if table is None:
            return None
        entry = self.c.get(table, where, "entry", None, self._entry)
        args = self.c.get(table, where, "args", (), self._args)  # checked even without entry
        input_shape = self.c.get(table, where, "input", None, self._input)
        if entry is None:  # reported: the config fails
            return None
        return Target(
            name=name, entry_path=entry[0], entry_layer=entry[1], args=args, input=input_shape
        )

    # -- checks: (where, value) -> normalised value, or None after reporting a problem --

    def _string(self, where: Path, value: Any) -> str | None:
        return self.c.expect(where, value, lambda v: isinstance(v, str) and v, "a non-empty string")

    def _folder(self, where: Path, value: Any) -> str | None:
        text = self._string(where, value)
        return posixpath.normpath(text.replace("\\", "/")) if text else None

    def _out(self, where: Path, value: Any) -> str | None:
        """The output folder: a folder whose modules every depfile names, so one make and
        ninja both read back (``base.depnames``)."""
        folder = self._folder(where, value)
        why = None if folder is None else unwritable(posixpath.join(folder, "module.py"))
        if why is None:
            return folder
        self.c.report(
            where,
            f"output folder `{folder}` cannot be named in a depfile: {why}",
            self.c.locator.value(where),
            expected="a folder name without `; = | % * ? [ \\ < > ^` or backquotes",
        )
        return None

    def _positive_int(self, where: Path, value: Any) -> int | None:
        return self.c.expect(where, value, _is_positive_int, "a positive integer")

    def _jobs(self, where: Path, value: Any) -> int | None:
        return self.c.expect(
            where,
            value,
            lambda v: _is_int(v) and v >= 0,
            "a non-negative integer (0 = one job per CPU)",
        )

    def _opt_level(self, where: Path, value: Any) -> str | None:
        ok = self.c.expect(
            where,
            value,
            lambda v: (_is_int(v) or v == "s") and str(v) in OPT_LEVELS,
            '0, 1, 2, 3 or "s"',
        )  # not 2.0: it equals 2, but names no level
        return None if ok is None else str(ok)

    def _sources(self, where: Path, value: Any) -> tuple[str, ...] | None:
        folders = self.c.expect_list(
            where, value, lambda v: isinstance(v, str) and v, "a non-empty array of folder paths"
        )
        if folders is None:
            return None
        found = [
            self._inside_root(where + (i,), raw, os.path.isdir, "source folder")
            for i, raw in enumerate(folders)
        ]
        folders_found = [f for f in found if f is not None]
        return None if len(folders_found) < len(found) else tuple(dict.fromkeys(folders_found))

    def _entry(self, where: Path, value: Any) -> tuple[str, str] | None:
        expected = 'a string "file.tri:Layer"'
        file, _, layer = value.rpartition(":") if isinstance(value, str) else ("", "", "")
        if not (file.endswith(".tri") and _IDENTIFIER.fullmatch(layer) and layer not in KEYWORDS):
            self.c.wrong(
                where,
                expected,
                value,
                help='e.g. "models/mlp.tri:MLP": the file, a colon, the layer to build',
            )
            return None
        found = self._inside_root(where, file, os.path.isfile, "entry file")
        return None if found is None else (found, layer)

    def _inside_root(self, where: Path, raw: str, exists: Any, what: str) -> str | None:
        """``raw`` as a normalised posix path under the root, if it is one and ``exists``."""
        path = posixpath.normpath(raw.replace("\\", "/"))
        if posixpath.isabs(path) or _windows_isabs(raw):
            message, expected, help = (
                f"{what} `{raw}` is an absolute path",
                "a path relative to the project root",
                None,
            )
        elif path == ".." or path.startswith("../"):
            message, expected, help = (
                f"{what} `{raw}` is outside the project root",
                "a path inside the project root",
                None,
            )
        elif not exists(os.path.join(self.root, path)):
            there = _what_is_there(os.path.join(self.root, path))
            message, expected, help = (
                f"{what} `{path}` {there or 'does not exist'}",
                None,
                None if there else _similar_path(self.root, path, exists),
            )
        elif not resolves_inside(self.root, os.path.join(self.root, path)):
            message, expected, help = (
                f"{what} `{path}` leads outside the project root through a symbolic link",
                "a path inside the project root",
                None,
            )
        else:
            return path
        self.c.report(where, message, self.c.locator.value(where), expected=expected, help=help)
        return None

    def _args(self, where: Path, value: Any) -> tuple[tuple[str, ArgValue], ...] | None:
        table = self.c.expect(where, value, lambda v: isinstance(v, dict), "a table")
        if table is None:
            return None
        args = []
        for name, arg in table.items():
            if not _IDENTIFIER.fullmatch(name) or name in KEYWORDS:
                self.c.report(
                    where + (name,),
                    f"argument name `{name}` is not a .tri identifier",
                    self.c.locator.key(where + (name,)),
                    expected="an identifier",
                )
            bad = _bad_arg(arg)
            if bad is not None:
                self.c.wrong(where + (name,), _ARG_EXPECTED, bad[1], bad[0])
            args.append((name, _frozen(arg)))
        return tuple(sorted(args, key=lambda arg: arg[0]))

    def _input(self, where: Path, value: Any) -> tuple[int, ...] | None:
        shape = self.c.expect_list(where, value, _is_positive_int, "a list of positive integers")
        return None if shape is None else tuple(shape)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_int(value: Any) -> bool:
    return _is_int(value) and value > 0


def _bad_arg(value: Any, item: Path = ()) -> tuple[Path, Any] | None:
    """The first part of an argument value that is not an allowed one, with its index path
    (a tuple is a list: ``compile_model``'s arguments come from Python). The one rule for
    every way a value comes in (Tribuild.toml's args, ``--arg``, ``compile_model``), and the
    .tri literals' (E0105): an integer beyond 64 bits or a float that is not finite is
    refused, never generated as ``TernaryLinear(8, 99999...)`` or ``float('inf')``."""
    if isinstance(value, (list, tuple)):
        for index, element in enumerate(value):
            bad = _bad_arg(element, item + (index,))
            if bad is not None:
                return bad
        return None
    if isinstance(value, int) and -INT64_LIMIT <= value < INT64_LIMIT:  # as a .tri literal
        return None
    if isinstance(value, str) or (isinstance(value, float) and math.isfinite(value)):
        return None
    return item, value


def arg_value(name: str, value: Any) -> ArgValue:
    """A construction argument given in Python (``compile_model(..., blocks=[2, 2])``, or a
    tuple) as a target's: lists become tuples. Raises ValueError naming what is not
    allowed."""
    bad = _bad_arg(value)
    if bad is not None:
        where = "".join(f"[{i}]" for i in bad[0])
        raise ValueError(
            f"argument {name}{where} is {bad[1]!r}: expected {_ARG_EXPECTED} (as in "
            "Tribuild.toml's args)"
        )
    return _frozen(value)


def _frozen(value: Any) -> ArgValue:
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def _what_is_there(full: str) -> str | None:
    """What sits at ``full`` when it is not what was expected (a folder, a FIFO, a link to
    nothing), said the way a message ends; None when nothing is there."""
    try:
        mode = os.lstat(full).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(full).st_mode
        except OSError:
            return "is a symbolic link to nothing"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISREG(mode):
        return "is a file, not a folder"
    return "is not a regular file (a FIFO, socket or device)"


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both absolute and resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def resolves_inside(root: str, path: str) -> bool:
    """Whether ``path`` resolves, symbolic links followed, to ``root`` or under it."""
    top = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _similar_path(root: str, path: str, exists: Any) -> str | None:
    """A did-you-mean for a missing path, from the names in its parent folder that ``exists``."""
    folder, name = posixpath.split(path)
    try:
        names = [
            n
            for n in os.listdir(os.path.join(root, folder))
            if exists(os.path.join(root, folder, n))
        ]
    except OSError:
        return None
    close = closest(name, names)
    return f"did you mean `{posixpath.join(folder, close)}`?" if close else None
