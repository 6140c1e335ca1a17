"""A cache of converted weights: what ``checkpoint.load_checkpoint`` made of a checkpoint
folder, written by the first load, mapped by every later load of the same folder (as llama.cpp
maps a GGUF it converted once), so that they read no float weight.

Terms:
- *conversion*: what a load makes that costs time to make again: each ternary weight
  ternarized and packed (most of a float-layout checkpoint's load: reading its float32
  weights) or re-packed (the packed layout), and its scale; each packed linear weight in the
  kernels' layout (``native.layout``, else made at its first call: the first token's time);
  with ``int8_floats``, the 8-bit rows of the large float layers (``int8.quantized_rows``);
  which weights' zero-skip plan skips nothing (``skip.skips_nothing``, else a scan of the
  packed bytes at the first call, which would read pages the CPU kernels never read).
- *entry*: one safetensors file a checkpoint folder, ``<root>/<digest of the folder's resolved
  path>.safetensors``: a new conversion of the folder replaces its entry, so the cache does
  not grow with every edit of a checkpoint. Its tensors are ``ternary/<key>`` and
  ``ternary/<key>_scale``, ``layout/<key>``, and ``rows/<layer>.panel``, ``.scale`` and
  ``.shape`` (``int8.Rows``: the panel the kernels read);
  its metadata holds the *key*, the *lazy* keys and the *whole* ones (that skip nothing).
- *key*: what the conversion depends on, as JSON, compared whole with the entry's: each
  checkpoint file's (``*.safetensors``, ``config.json``) resolved path, size, ``mtime_ns``,
  ``ctime_ns`` and inode; the module's class, its state_dict's keys, shapes and dtypes and
  its ternary spec (keys, shapes, scale modes); ``int8_floats`` and ``int8.MIN_WEIGHTS``; the
  kernels' layout identity (``native.layout_identity``, or none without the kernels, which
  also pack and quantize); ``FORMAT`` and the digest of the Python sources that convert
  (``SOURCES``), so no edit of the conversion is ever served an entry of the old one.
- *lazy*: the state_dict keys whose float tensors the loaded module drops (the layers that
  ``quantize_floats`` replaces): a hit maps them from the checkpoint unread (nothing touches
  them before they are dropped) instead of reading them.
- *hit*: an entry whose key is the load's. Its tensors are mapped copy-on-write
  (``safetensors_io.map_copy_on_write``): pages are read when first touched, and a module
  modified in place never writes to the file. Entries are replaced by a rename, never
  rewritten in place, so a map stays valid while a later load replaces its entry.
- *written atomically*: to a temporary file beside the entry, renamed over it
  (``os.replace``): a killed process or two concurrent loads leave the old entry, the new one
  or none, never half a file; a killed writer's temporary file is deleted by the next load
  that writes the entry, once it is ``STALE_S`` old. An entry whose header does not fit its
  size (truncated, or not safetensors) or that lacks a tensor its key promises is *corrupt*:
  the load says so in one line, converts, and writes it again.
- *root*: ``$TRIBUILD_WEIGHT_CACHE`` (a folder), else ``build.cache_root()/weights``; the
  variable set to ``off`` (or ``0``, ``no``, ``false``) turns the cache off, as
  ``load_checkpoint(..., cache=False)`` does. Where no entry can be written, a load converts
  as without the cache, and says why once.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import torch

from tribuild.base.hashing import digest
from tribuild.runtime import int8, native, skip
from tribuild.runtime.kernels.cpu import build
from tribuild.runtime.safetensors_io import FileError, map_copy_on_write, write

FORMAT = 1  # the entry's own layout (names, metadata); the conversion's code is in SOURCES
VARIABLE = "TRIBUILD_WEIGHT_CACHE"
OFF = frozenset({"off", "0", "no", "false"})
_HERE = Path(__file__).parent
SOURCES = tuple(
    _HERE / name
    for name in (
        "weight_cache.py",
        "checkpoint.py",
        "packing.py",
        "ternarize.py",
        "int8.py",
        "safetensors_io.py",
        "skip.py",
    )
)
TERNARY, SCALE, LAYOUT, ROWS = "ternary/", "_scale", "layout/", "rows/"
STALE_S = 3600  # a temporary entry this old is a dead writer's: writing one takes seconds
_unwritable: set[Path] = set()  # roots a load could not write to, said once each

# a ternary weight's key -> (its shape, its scale mode), as checkpoint._load collects them
Spec = dict[str, tuple[tuple[int, ...], str]]


class Hit(NamedTuple):
    """An entry's tensors (see *hit*), mapped."""

    ternary: dict[str, torch.Tensor]  # packed weights and their scales, by state_dict key
    layouts: dict[str, torch.Tensor]  # a ternary key -> its weight in the kernels' layout
    rows: dict[str, int8.Rows]  # int8.quantize_floats' ``rows``
    lazy: frozenset[str]
    whole: frozenset[str]  # ternary keys whose zero-skip plan skips nothing


def root() -> Path | None:
    """Where entries live, or None when the cache is off (see *root*)."""
    env = os.environ.get(VARIABLE)
    if env and env.strip().lower() in OFF:
        return None
    return Path(env) if env else build.cache_root() / "weights"


@functools.cache  # once a process: the code that converts is the code it imported
def _sources_digest() -> str:
    return digest(b"\0".join(path.read_bytes() for path in SOURCES))


def _file_stamp(path: Path) -> list[object]:
    # as the no-op manifest judges a file (hashing 1.7 GB of float32 would cost the time a hit
    # saves); the ctime, which no user call sets, catches a same-size rewrite in place whose
    # mtime was put back (cp -p, rsync --inplace -t, touch -r)
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class Slot:
    """The entry of one checkpoint folder for one load (see *entry* and *key*)."""

    def __init__(self, path: Path, key: str, lib: build.Library | None, ternary: Spec):
        self.path, self.key, self.lib, self.ternary = path, key, lib, ternary

    @classmethod
    def of(
        cls, model: torch.nn.Module, folder: Path, ternary: Spec, int8_floats: bool
    ) -> Slot | None:
        """The slot of ``folder`` for ``model`` (``empty_model``'s, ``ternary`` its spec), or
        None when the cache is off."""
        where = root()
        if where is None:
            return None
        lib = native.library("a checkpoint being loaded")  # packs and quantizes it anyway
        files = sorted(folder.glob("*.safetensors"))
        if (folder / "config.json").exists():  # tie_word_embeddings chooses what loads
            files.append(folder / "config.json")
        key = {
            "format": FORMAT,
            "sources": _sources_digest(),
            "layout": None if lib is None else native.layout_identity(lib),
            "class": f"{type(model).__module__}.{type(model).__qualname__}",
            "state": [[k, list(v.shape), str(v.dtype)] for k, v in model.state_dict().items()],
            "ternary": [[k, list(shape), mode] for k, (shape, mode) in ternary.items()],
            "int8_floats": int8_floats,
            "min_weights": int8.MIN_WEIGHTS,
            "files": [_file_stamp(f) for f in files],
        }
        name = digest(str(folder.resolve()).encode())
        return cls(where / f"{name}.safetensors", json.dumps(key, sort_keys=True), lib, ternary)

    def lookup(self) -> Hit | None:
        """The entry's tensors if it holds this load's key, else None (corrupt: said once)."""
        if not self.path.exists():
            return None
        try:
            tensors, meta = map_copy_on_write(self.path)  # unread until touched
            if meta.get("key") != self.key:  # stale: this load's conversion replaces it
                return None
            return self._hit(tensors, meta)
        except (FileError, OSError, ValueError, KeyError) as e:
            self._corrupt(str(e) if not isinstance(e, KeyError) else f"no {e}")
            return None

    def _hit(self, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> Hit:
        """The entry's tensors sorted out (KeyError: one the key promises is not there)."""
        ternary = {k[len(TERNARY) :]: v for k, v in tensors.items() if k.startswith(TERNARY)}
        missing = [k for key in self.ternary for k in (key, key + SCALE) if k not in ternary]
        if missing:
            raise KeyError(TERNARY + missing[0])
        layouts = {k[len(LAYOUT) :]: v for k, v in tensors.items() if k.startswith(LAYOUT)}
        rows = {}
        for k, panel in tensors.items():
            if k.startswith(ROWS) and k.endswith(".panel"):
                stem = k[: -len(".panel")]
                n, width = tensors[stem + ".shape"].tolist()
                rows[stem[len(ROWS) :]] = int8.Rows(panel, tensors[stem + ".scale"], (n, width))
        lazy, whole = (frozenset(json.loads(meta.get(name, "[]"))) for name in ("lazy", "whole"))
        return Hit(ternary, layouts, rows, lazy, whole)

    def adopt(self, model: torch.nn.Module, hit: Hit) -> None:
        """``model``'s packed linear weights given their layouts from ``hit`` (see
        ``native.adopt_layout``) and their zero-skip plans, so that their first call neither
        converts nor reads them."""
        for key in hit.whole:
            skip.adopt_whole(model.get_buffer(key))
        if self.lib is None:
            return
        for key, converted in hit.layouts.items():
            shape, _ = self.ternary[key]
            native.adopt_layout(self.lib, model.get_buffer(key), shape[1], converted)

    def store(self, model: torch.nn.Module, lazy: set[str]) -> None:
        """Write the conversion of ``model`` (just loaded, its 8-bit layers made) as the
        folder's entry, atomically (see *written atomically*); its packed linear weights'
        layouts are made now (and kept for its own first call)."""
        tensors: dict[str, torch.Tensor] = {}
        whole = []
        for key, (shape, _) in self.ternary.items():
            packed = model.get_buffer(key)
            if packed.device.type != "cpu":  # a module loaded onto another device
                return
            if skip.skips_nothing(packed):
                whole.append(key)
                skip.adopt_whole(packed)
            tensors[TERNARY + key] = packed
            tensors[TERNARY + key + SCALE] = model.get_buffer(key + SCALE)
            if self.lib is not None and len(shape) == 2:  # a linear weight: the kernels'
                n, k = shape
                tensors[LAYOUT + key] = native.layout(self.lib, packed, n, k)
        for layer, rows in int8.quantized_rows(model).items():
            tensors[f"{ROWS}{layer}.panel"], tensors[f"{ROWS}{layer}.scale"] = (
                rows.panel,
                rows.scale,
            )
            tensors[f"{ROWS}{layer}.shape"] = torch.tensor(rows.shape, dtype=torch.int64)
        meta = {"key": self.key, "lazy": json.dumps(sorted(lazy)), "whole": json.dumps(whole)}
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._sweep()
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.stem}-", dir=self.path.parent)
            os.close(fd)
            write(tmp, tensors, meta)
            os.replace(tmp, self.path)  # atomic: a reader sees the old entry or the new one
            tmp = None
        except OSError as e:
            if self.path.parent not in _unwritable:
                _unwritable.add(self.path.parent)
                warnings.warn(
                    f"tribuild: the weight cache {self.path.parent} cannot be written ({e}): "
                    f"each load converts its checkpoint again; set {VARIABLE} to a writable "
                    "folder, or to off",
                    RuntimeWarning,
                    stacklevel=3,
                )
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def _sweep(self) -> None:
        """Delete this entry's temporary files left by a killed writer (SIGKILL, the OOM
        killer, a power cut: no ``finally`` ran), each as large as an entry, which no later
        load would otherwise remove; one younger than ``STALE_S`` may be a live writer's."""
        now = time.time()
        for left in self.path.parent.glob(f".{self.path.stem}-*"):
            try:
                if now - left.stat().st_mtime > STALE_S:
                    left.unlink()
            except OSError:  # gone meanwhile (another load swept it), or not ours to delete
                pass

    def _corrupt(self, why: str) -> None:
        warnings.warn(
            f"tribuild: ignoring the corrupt weight cache entry {self.path} ({why}); "
            "converting the checkpoint again",
            RuntimeWarning,
            stacklevel=3,
        )
