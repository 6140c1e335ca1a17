"""The weight cache (``tribuild.runtime.weight_cache``): a second load of a checkpoint folder
maps what the first converted, and gives the same module, bit for bit."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.runtime import checkpoint, int8, native, skip, weight_cache  # noqa: E402
from tribuild.runtime.checkpoint import load_checkpoint  # noqa: E402
from tribuild.runtime.kernel_files import class_file  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.safetensors_io import ALIGN, PAD, header, write  # noqa: E402

ENTRY = "models/bitnet_lm.tri:BitNetLM"
# vocab · dim = int8.MIN_WEIGHTS: the tied head is quantized to 8 bits with int8_floats
ARGS = dict(vocab=4096, dim=256, layers=1, heads=4, kv_heads=2, hidden=320)


@pytest.fixture(autouse=True)
def _native_backend():
    """What a CPU user runs (the tests' default is Triton's interpreter): the kernels, whose
    layouts the cache holds, or the torch path where they cannot be built."""
    with force_backend("cpu" if native.library() is not None else "torch"):
        yield


@pytest.fixture(scope="module")
def Model(tmp_path_factory):
    return write_and_import(build(ENTRY, ARGS, "3"), tmp_path_factory.mktemp("cached_lm")).Model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(weight_cache.VARIABLE, str(root))
    return root


def write_folder(Model, folder, seed: int = 0) -> None:
    """A float-layout checkpoint with tied embeddings, as transformers saves BitNet models."""
    gen = torch.Generator().manual_seed(seed)
    state = Model.float_module().state_dict()
    tensors = {
        k: (1.0 + 0.1 * torch.randn(v.shape, generator=gen))
        if v.dim() == 1
        else 0.02 * torch.randn(v.shape, generator=gen)
        for k, v in state.items()
        if k != "lm_head.weight"
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))


def write_packed_folder(Model, folder) -> None:
    """The same in transformers' packed layout, the embedding in bfloat16 (as
    bitnet-b1.58-2B-4T ships them)."""
    from transformers.integrations.bitnet import pack_weights

    write_folder(Model, folder)
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    gen = torch.Generator().manual_seed(5)
    for key in [k for k in tensors if k.endswith("_proj.weight")]:
        codes = torch.randint(-1, 2, tensors[key].shape, generator=gen).float()
        tensors[key] = pack_weights(codes)
        tensors[key.replace(".weight", ".weight_scale")] = torch.tensor([40.0])
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].bfloat16()
    save_file(tensors, str(path))


def ids() -> torch.Tensor:
    return torch.arange(9).reshape(1, 9) * 37 % ARGS["vocab"]


def assert_same(a, b) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for key, value in sa.items():
        assert sb[key].dtype == value.dtype and torch.equal(sb[key], value), key
    with torch.no_grad():
        assert torch.equal(a(ids()), b(ids()))


def entries_in(root) -> list:
    return sorted(p for p in root.iterdir() if not p.name.startswith("."))


@pytest.fixture
def no_conversion(monkeypatch):
    """A load that ternarizes, repacks for the kernels or quantizes a row fails: a hit must not."""

    def refuse(*args, **kwargs):
        raise AssertionError("converted, where the cache holds the conversion")

    def trap():
        monkeypatch.setattr(checkpoint, "pack_ternary", refuse)
        monkeypatch.setattr(checkpoint, "unpack_transformers", refuse)  # the packed layout's
        monkeypatch.setattr(int8.Rows, "quantize", refuse)
        monkeypatch.setattr(skip, "zero_skip", refuse)  # the scan for a zero-skip plan
        if (lib := native.library()) is not None:  # native.layout's conversion
            monkeypatch.setattr(lib.cdll, "tb_repack", refuse)

    return trap


@pytest.mark.parametrize("layout", ["float", "packed"])
@pytest.mark.parametrize("int8_floats", [False, True])
def test_a_second_load_maps_the_first_ones_conversion(
    Model, tmp_path, cache, no_conversion, int8_floats, layout
):
    folder = tmp_path / "ckpt"
    (write_folder if layout == "float" else write_packed_folder)(Model, folder)
    today = load_checkpoint(Model, folder, int8_floats=int8_floats, cache=False)
    assert not cache.exists()
    first = load_checkpoint(Model, folder, int8_floats=int8_floats)
    assert len(entries_in(cache)) == 1
    assert_same(today, first)  # today's first call converts its layouts, before the trap
    no_conversion()
    second = load_checkpoint(Model, folder, int8_floats=int8_floats)
    if int8_floats:
        assert isinstance(second.lm_head, int8.Int8Linear)
        assert isinstance(second.model.embed_tokens, int8.MappedEmbedding)
    lib = native.library()
    if lib is not None:  # the kernels' layouts are there before the first call
        packed = second.get_buffer("model.layers.0.mlp.down_proj.weight")
        assert native._layouts.get(id(packed), packed) is not None
    assert_same(today, second)


def test_a_changed_checkpoint_or_another_load_is_converted_again(Model, tmp_path, cache):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder, seed=1)
    load_checkpoint(Model, folder)
    (entry,) = entries_in(cache)
    write_folder(Model, folder, seed=2)  # new bytes, a new file (inode, mtime)
    assert_same(load_checkpoint(Model, folder), load_checkpoint(Model, folder, cache=False))
    load_checkpoint(Model, folder, int8_floats=True)  # another key: converts, replaces
    assert entries_in(cache) == [entry]  # one entry a folder
    key = json.loads(header(entry)[1]["key"])
    assert key["int8_floats"] is True
    assert key["class"] == f"{Model.__module__}.{Model.__qualname__}"
    assert [stamp[0] for stamp in key["files"]] == [
        str((folder / name).resolve()) for name in ("model.safetensors", "config.json")
    ]


def test_a_same_size_rewrite_with_its_mtime_put_back_is_converted_again(Model, tmp_path, cache):
    """``cp -p``, ``rsync --inplace -t``, ``touch -r``: the same file (inode), size and mtime,
    new weights; the ctime, which no user call sets, says so (as the no-op manifest's does)."""
    folder = tmp_path / "ckpt"
    write_folder(Model, folder, seed=1)
    path = folder / "model.safetensors"
    before = path.stat()
    load_checkpoint(Model, folder)
    write_folder(Model, tmp_path / "other", seed=2)  # same names and shapes: same size
    with open(path, "r+b") as f:  # written in place, as cp writes over a file
        f.write((tmp_path / "other" / "model.safetensors").read_bytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert_same(load_checkpoint(Model, folder), load_checkpoint(Model, folder, cache=False))


def test_a_mapped_embedding_written_in_place_leaves_its_file(Model, tmp_path):
    """int8_floats keeps the embedding over the checkpoint's own pages (MappedEmbedding): a
    write to it changes the module's copy of them; a read-only map made it a segfault."""
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    before = (folder / "model.safetensors").read_bytes()
    model = load_checkpoint(Model, folder, int8_floats=True, cache=False)
    embed = model.model.embed_tokens
    assert isinstance(embed, int8.MappedEmbedding)
    with torch.no_grad():
        rows = embed(ids())
        embed.table.mul_(2)
        assert torch.equal(embed(ids()), 2 * rows)
    assert (folder / "model.safetensors").read_bytes() == before


def test_a_weight_that_skips_channels_is_planned_at_its_first_call(Model, tmp_path, cache):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    zeroed = "model.layers.0.self_attn.o_proj.weight"
    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    tensors[zeroed][3] = 0.0  # an output channel of zero codes: its plan leaves it out
    save_file(tensors, str(path))
    today = load_checkpoint(Model, folder, cache=False)
    load_checkpoint(Model, folder)
    (entry,) = entries_in(cache)
    whole = set(json.loads(header(entry)[1]["whole"]))
    assert zeroed not in whole and len(whole) == 6  # the other six projections
    assert_same(today, load_checkpoint(Model, folder))


def test_changing_a_loaded_module_in_place_leaves_the_cache_as_it_is(Model, tmp_path, cache):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    first = load_checkpoint(Model, folder)
    (entry,) = entries_in(cache)
    before = entry.read_bytes()
    second = load_checkpoint(Model, folder)
    packed = second.get_buffer("model.layers.0.self_attn.q_proj.weight")
    with torch.no_grad():
        packed.zero_()
        second.get_buffer("model.layers.0.self_attn.q_proj.weight_scale").mul_(3)
        second.model.norm.weight.add_(1)
    assert not packed.any()  # the module's own copy changed
    assert entry.read_bytes() == before
    assert_same(first, load_checkpoint(Model, folder))


def test_a_cached_module_copies_and_saves_as_a_converted_one(Model, tmp_path, cache):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    load_checkpoint(Model, folder)
    cached = load_checkpoint(Model, folder)
    today = load_checkpoint(Model, folder, cache=False)
    torch.save(cached, tmp_path / "whole.pt")
    for other in (copy.deepcopy(cached), torch.load(tmp_path / "whole.pt", weights_only=False)):
        assert other.lm_head.weight is other.model.embed_tokens.weight
        assert_same(today, other)


@pytest.mark.parametrize("damage", ["truncated", "not safetensors"])
def test_a_corrupt_entry_is_said_ignored_and_written_again(Model, tmp_path, cache, damage):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    today = load_checkpoint(Model, folder, cache=False)
    load_checkpoint(Model, folder)
    (entry,) = entries_in(cache)
    size = entry.stat().st_size
    if damage == "truncated":  # as a writer that wrote in place and was killed would leave it
        with open(entry, "r+b") as f:
            f.truncate(size // 2)
    else:
        entry.write_bytes(b"\xff" * 64)
    with pytest.warns(RuntimeWarning, match="corrupt weight cache entry") as said:
        assert_same(today, load_checkpoint(Model, folder))
    assert len([w for w in said if "corrupt" in str(w.message)]) == 1
    assert entry.stat().st_size == size  # written again, whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(today, load_checkpoint(Model, folder))


def test_an_entry_replaced_while_it_is_looked_up_is_read_whole(Model, tmp_path, cache, monkeypatch):
    """Another process renames its entry of the folder (another key) over this one between
    the reading of its header and its map: the tensors come from the header's own file."""
    from tribuild.runtime import safetensors_io

    for seed in (1, 2):
        write_folder(Model, tmp_path / f"ckpt{seed}", seed=seed)
        load_checkpoint(Model, tmp_path / f"ckpt{seed}")
    mine, theirs = (
        weight_cache.Slot.of(Model.float_module(), tmp_path / f"ckpt{seed}", {}, False)
        for seed in (1, 2)
    )
    ours, other = (weight_cache.root() / p.path.name for p in (mine, theirs))
    assert ours.exists() and other.exists()
    real = safetensors_io.header

    def then_replaced(path, *args, **kwargs):
        found = real(path, *args, **kwargs)
        if Path(path) == ours and other.exists():  # once: the other entry renamed over ours
            os.replace(other, ours)
        return found

    monkeypatch.setattr(safetensors_io, "header", then_replaced)
    monkeypatch.setattr(weight_cache, "header", then_replaced, raising=False)
    today = load_checkpoint(Model, tmp_path / "ckpt1", cache=False)
    assert_same(today, load_checkpoint(Model, tmp_path / "ckpt1"))
    assert not other.exists()  # the race took place


def test_the_cache_is_off_by_argument_or_variable(Model, tmp_path, cache, monkeypatch):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    load_checkpoint(Model, folder, cache=False)
    assert not cache.exists()
    monkeypatch.setenv(weight_cache.VARIABLE, "off")
    load_checkpoint(Model, folder)
    assert not cache.exists()
    assert weight_cache.root() is None


def test_an_unwritable_cache_is_said_once_and_the_load_works(Model, tmp_path, monkeypatch):
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(weight_cache.VARIABLE, str(blocker / "weights"))  # under a file
    today = load_checkpoint(Model, folder, cache=False)
    with pytest.warns(RuntimeWarning, match="cannot be written") as said:
        assert_same(today, load_checkpoint(Model, folder))
        assert_same(today, load_checkpoint(Model, folder))
    assert len([w for w in said if "cannot be written" in str(w.message)]) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_killed_writers_temporary_file_is_deleted_by_the_next_write(Model, tmp_path, cache):
    """SIGKILL between the temporary file and its rename leaves a file as large as an entry
    that nothing else deletes; the next load that writes the entry deletes it once it is
    STALE_S old, and leaves a younger one (a live writer's) alone."""
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    load_checkpoint(Model, folder)
    (entry,) = entries_in(cache)
    killed, live = (cache / f".{entry.stem}-{name}" for name in ("killed", "writing"))
    for left in (killed, live):
        left.write_bytes(b"\0" * 4096)
    old = time.time() - 2 * weight_cache.STALE_S
    os.utime(killed, (old, old))
    entry.unlink()  # what the killed first load left: no entry
    load_checkpoint(Model, folder)
    assert entry.exists() and live.exists() and not killed.exists()


LOAD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location(sys.argv[1], sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tribuild.runtime.checkpoint import load_checkpoint
load_checkpoint(module.Model, sys.argv[3], int8_floats=True)
"""


def test_concurrent_first_loads_leave_one_whole_entry(Model, tmp_path, cache, no_conversion):
    """Two processes convert the same folder at once: each writes a temporary file and renames
    it over the entry, so the entry left is one of them, whole, and a third load maps it."""
    folder = tmp_path / "ckpt"
    write_folder(Model, folder)
    source = class_file(Model)
    args = [sys.executable, "-c", LOAD, Model.__module__, source, str(folder)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    # this process's thread count: the ternary scale's mean(|w|) is torch's reduction, whose
    # order (and last bit) follows the threads, and a test before may have changed them
    env["OMP_NUM_THREADS"] = str(torch.get_num_threads())
    runs = [subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read() if run.stderr else ""
    assert len(entries_in(cache)) == 1 and not list(cache.glob(".*"))  # no temporary left
    today = load_checkpoint(Model, folder, int8_floats=True, cache=False)
    assert_same(today, today)  # its layouts made before the trap
    no_conversion()
    assert_same(today, load_checkpoint(Model, folder, int8_floats=True))


def test_written_files_are_safetensors_with_aligned_data(tmp_path):
    tensors = {
        "a": torch.arange(3, dtype=torch.uint8),
        "b": torch.randn(5, 3),
        "c": torch.arange(7, dtype=torch.int8).reshape(7, 1),
        "empty": torch.empty(0, 4),
    }
    path = tmp_path / "t.safetensors"
    write(path, tensors, {"key": "v"})
    found, meta = header(path)
    assert meta == {"key": "v"}
    assert all(e.begin % ALIGN == 0 for k, e in found.items() if not k.startswith(PAD))
    with safe_open(str(path), "pt") as f:  # safetensors' own reader takes it (no holes)
        assert f.metadata() == {"key": "v"}
        for key, value in tensors.items():
            assert torch.equal(f.get_tensor(key), value), key
    assert os.path.getsize(path) == max(e.end for e in found.values())
