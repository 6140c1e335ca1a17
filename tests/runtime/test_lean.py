"""The lean decode step (issue 34): a frozen or loaded model holds packed bytes and scales
for its ternary layers and no float copy of them; a checkpoint folder loads tensor by tensor
into an empty model, bit-exact with ``from_float`` and with ``freeze``; loaded models are in
eval mode, tied embeddings stay one parameter; the KV cache is written in place.

The model is the generated BitNet LM (models/bitnet_lm.tri) at a tiny size; float weights
come from its float twin (transformers' key names), packed ones through transformers'
``pack_weights``; nothing is downloaded.
"""

from __future__ import annotations

import copy
import gc
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from safetensors.torch import save_file  # noqa: E402

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.runtime import dense  # noqa: E402
from tribuild.runtime.checkpoint import CheckpointError, load_checkpoint, load_tensors  # noqa: E402
from tribuild.runtime.decoding import KVCache  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.nn import TernaryLayer, dense_cache_bytes, dense_cache_limit  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

ENTRY = "models/bitnet_lm.tri:BitNetLM"
ARGS = dict(vocab=96, dim=64, layers=2, heads=4, kv_heads=2, hidden=160)


@pytest.fixture(autouse=True)
def _torch_backend():
    with force_backend("torch"):
        yield


@pytest.fixture(scope="module")
def Model(tmp_path_factory):
    return write_and_import(build(ENTRY, ARGS, "2"), tmp_path_factory.mktemp("lean_lm")).Model


@pytest.fixture
def unlimited_dense():
    previous = dense_cache_limit(1 << 40)
    yield
    dense_cache_limit(previous)


def float_state(Model, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random float weights with the model's float state_dict keys (norms near 1)."""
    gen = torch.Generator().manual_seed(seed)
    state = Model.float_module().state_dict()
    return {
        k: 1.0 + 0.1 * torch.randn(v.shape, generator=gen)
        if v.dim() == 1
        else torch.randn(v.shape, generator=gen)
        for k, v in state.items()
    }


def packed_folder(Model, folder, seed: int = 0) -> dict[str, torch.Tensor]:
    """A folder in transformers' packed layout, embeddings tied and in bfloat16 (as
    bitnet-b1.58-2B-4T ships them); returns the codes and weight_scale of each projection."""
    from transformers.integrations.bitnet import pack_weights

    gen = torch.Generator().manual_seed(seed)
    written, truth = {}, {}
    for key, value in float_state(Model, seed).items():
        if key == "lm_head.weight":
            continue
        if key.endswith("_proj.weight"):
            codes = torch.randint(-1, 2, value.shape, generator=gen).float()
            written[key] = pack_weights(codes.clone())
            written[key.replace(".weight", ".weight_scale")] = torch.tensor([40.0 + seed])
            truth[key] = codes
        else:
            written[key] = value.bfloat16() if value.dim() == 2 else value
    save_file(written, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"tie_word_embeddings": True}))
    return truth


def held_tensors(model) -> list[torch.Tensor]:
    """Every tensor the model holds: parameters, buffers, and any tensor an attribute of a
    submodule reaches (caches included), once per storage, plus the runtime's unpacked-codes
    cache entries of the model's own buffers."""
    found: dict[int, torch.Tensor] = {}

    def walk(value, depth: int = 0) -> None:
        if isinstance(value, torch.Tensor):
            if not value.is_meta:
                found.setdefault(value.untyped_storage().data_ptr(), value)
        elif depth < 4 and isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)
        elif depth < 4 and isinstance(value, (list, tuple)):
            for v in value:
                walk(v, depth + 1)

    for module in model.modules():
        walk(module.__dict__)
    own = {id(b) for b in model.buffers()}
    for packed, (_, codes) in dense._unpacked.held():
        if id(packed) in own:
            walk(codes)
    return list(found.values())


def ternary_layers(model):
    return [(m, n, s) for m in model.modules() if isinstance(m, TernaryLayer) for n, s in m.TERNARY]


def float_copies(model) -> list[torch.Tensor]:
    """The float tensors held with as many elements as a ternary weight."""
    sizes = {torch.Size(s).numel() for _, _, s in ternary_layers(model)}
    return [t for t in held_tensors(model) if t.is_floating_point() and t.numel() in sizes]


def ids(n: int = 7) -> torch.Tensor:
    return torch.randint(0, ARGS["vocab"], (1, n), generator=torch.Generator().manual_seed(1))


def loaded(Model, how: str, tmp_path):
    state = float_state(Model)
    if how == "from_float":
        return Model.from_float(state)
    if how == "folder":
        save_file(state, str(tmp_path / "model.safetensors"))
        return load_checkpoint(Model, tmp_path)
    if how == "packed folder":
        packed_folder(Model, tmp_path)
        return load_checkpoint(Model, tmp_path)
    model = Model()  # trained from scratch, then frozen
    model(ids())
    return model.freeze().eval()


@pytest.mark.parametrize("how", ["from_float", "folder", "packed folder", "freeze"])
def test_a_frozen_or_loaded_model_holds_no_float_copy_of_a_ternary_weight(Model, how, tmp_path):
    model = loaded(Model, how, tmp_path)
    assert float_copies(model) == []
    before = sum(t.untyped_storage().nbytes() for t in held_tensors(model))
    packed = sum(
        getattr(m, n).numel() + getattr(m, f"{n}_scale").nbytes for m, n, _ in ternary_layers(model)
    )
    floats = {
        id(p): p
        for m in model.modules()
        if not isinstance(m, TernaryLayer)
        for p in m.parameters(recurse=False)
    }
    ternary_biases = {
        id(p): p for m, _, _ in ternary_layers(model) for p in m.parameters(recurse=False)
    }
    assert before == packed + sum(p.nbytes for p in {**floats, **ternary_biases}.values())
    previous = dense_cache_limit(0)  # the dense weights made per product, none kept
    try:
        model.generate(ids(), 4)
    finally:
        dense_cache_limit(previous)
    assert float_copies(model) == []
    assert sum(t.untyped_storage().nbytes() for t in held_tensors(model)) == before


def test_the_dense_cache_keeps_one_float_weight_per_layer_within_its_budget(Model, unlimited_dense):
    model = Model.from_float(float_state(Model))
    gc.collect()  # other tests' models, freed now rather than while this one counts
    start = dense_cache_bytes()
    expected = model.generate(ids(), 4)
    copies = float_copies(model)
    weights = len(ternary_layers(model))
    assert len(copies) == weights  # the dense weight only: no float codes beside it
    assert dense_cache_bytes() - start == sum(t.untyped_storage().nbytes() for t in copies)
    one = max(t.untyped_storage().nbytes() for t in copies)
    del model, copies
    gc.collect()
    assert dense_cache_bytes() == start  # freed weights give their bytes back
    dense_cache_limit(start + one)  # room for about one weight: the rest are made per call
    model = Model.from_float(float_state(Model))
    assert torch.equal(model.generate(ids(), 4), expected)
    assert 1 <= len(float_copies(model)) < weights
    assert dense_cache_bytes() - start <= one


def test_loading_a_float_folder_is_bit_exact_with_from_float_and_freeze(Model, tmp_path):
    state = float_state(Model, seed=3)
    save_file(state, str(tmp_path / "model.safetensors"))
    folder = load_checkpoint(Model, tmp_path).state_dict()
    converted = Model.from_float(state).state_dict()
    trained = Model().qat(state).freeze().state_dict()  # latent weights packed by freeze
    given = load_tensors(Model, state).state_dict()
    assert set(folder) == set(converted) == set(trained) == set(given)
    packed = {k for k, v in folder.items() if v.dtype == torch.uint8 or k.endswith("_scale")}
    assert len(packed) == 2 * 14  # 7 projections in each of 2 layers, and their scales
    for key, value in folder.items():  # qat(state) takes the ternary weights only
        for other in (converted, given, *([trained] if key in packed else [])):
            assert other[key].dtype == value.dtype and torch.equal(other[key], value), key


def test_loading_a_packed_folder_gives_the_codes_and_scales(Model, tmp_path):
    truth = packed_folder(Model, tmp_path, seed=2)
    model = load_checkpoint(Model, tmp_path)
    for key, codes in truth.items():
        assert torch.equal(model.get_buffer(key), pack(codes)), key
        assert torch.equal(model.get_buffer(f"{key}_scale"), torch.tensor([1 / 42.0]))
    # transformers' bfloat16 embeddings come as the float32 the module declares, tied
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.lm_head.weight.dtype == torch.float32


@pytest.mark.parametrize("how", ["from_float", "folder", "packed folder", "tensors", "partial"])
def test_loaded_models_are_in_eval_mode(Model, how, tmp_path):
    if how == "tensors":
        model = load_tensors(Model, float_state(Model))
    elif how == "partial":  # strict=False with a weight missing: the full-construction path
        state = float_state(Model)
        del state["model.norm.weight"]
        model = Model.from_float(state, strict=False)
    else:
        model = loaded(Model, how, tmp_path)
    assert not any(m.training for m in model.modules())
    assert not any(t.is_meta for t in [*model.parameters(), *model.buffers()])


def test_a_loaded_model_shares_no_storage_with_the_given_tensors(Model):
    state = float_state(Model)
    for model in (Model.from_float(state), load_tensors(Model, state)):
        before = model(ids())
        with torch.no_grad():
            for value in state.values():
                value.mul_(2)
        assert torch.equal(model(ids()), before)


def test_tied_embeddings_survive_copies_saves_and_dtype_moves(Model, tmp_path):
    packed_folder(Model, tmp_path)
    model = load_checkpoint(Model, tmp_path)
    expected = model(ids())
    path = tmp_path / "whole.pt"
    torch.save(model, path)
    for other in (copy.deepcopy(model), torch.load(path, weights_only=False)):
        assert other.lm_head.weight is other.model.embed_tokens.weight
        assert torch.equal(other(ids()), expected)
    moved = copy.deepcopy(model).double()
    assert moved.lm_head.weight is moved.model.embed_tokens.weight
    assert moved.lm_head.weight.dtype == torch.float64
    torch.testing.assert_close(moved(ids()).float(), expected, rtol=1e-4, atol=1e-4)


def test_the_kv_cache_is_written_in_place_and_steps_match_the_whole_sequence(Model):
    model = Model.from_float(float_state(Model))
    sequence = ids(12)
    with torch.no_grad():
        whole = model(sequence)
        cache = KVCache(12)
        with cache.step():
            steps = [model(sequence[:, :5])]
        buffers = [(k.data_ptr(), v.data_ptr()) for k, v in cache._slots]
        for i in range(5, 12):
            with cache.step():
                steps.append(model(sequence[:, i : i + 1]))
    assert [(k.data_ptr(), v.data_ptr()) for k, v in cache._slots] == buffers
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, rtol=1e-4, atol=1e-4)
    assert torch.equal(torch.cat(steps, dim=1).argmax(-1), whole.argmax(-1))


def test_a_broken_safetensors_file_is_named(Model, tmp_path):
    save_file(float_state(Model), str(tmp_path / "model.safetensors"))
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors: tensor .* data offsets"):
        load_checkpoint(Model, tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x10" + bytes(7) + b"not json at all!")
    with pytest.raises(CheckpointError, match="model.safetensors: its header is not JSON"):
        load_checkpoint(Model, tmp_path)


def test_the_native_cpu_backend_builds_no_dense_weight(Model):
    from tribuild.runtime import native

    if native.library() is None:
        pytest.skip("no C++ compiler: the native CPU kernels did not build")
    with torch.no_grad():  # the torch backend (this file's fixture), on another instance
        expected = Model.from_float(float_state(Model)).generate(ids(), 4)
    model = Model.from_float(float_state(Model))
    gc.collect()  # the other instance's dense weights, freed before counting
    start = dense_cache_bytes()
    with force_backend("cpu"), torch.no_grad():
        found = model.generate(ids(), 4)
    assert float_copies(model) == [] and dense_cache_bytes() == start
    assert torch.equal(found, expected)


def test_a_load_leaves_the_cyclic_collector_as_it_found_it(Model, tmp_path):
    """load_checkpoint pauses the collector while it builds the model (its full passes were
    40% of a cached load) and gives it back as it was, after a failed load too."""
    save_file(float_state(Model), str(tmp_path / "model.safetensors"))
    assert gc.isenabled()
    load_checkpoint(Model, tmp_path)
    assert gc.isenabled()
    gc.disable()
    try:
        load_checkpoint(Model, tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    (tmp_path / "model.safetensors").write_bytes(b"\x10" + bytes(7) + b"not json at all!")
    with pytest.raises(CheckpointError):
        load_checkpoint(Model, tmp_path)
    assert gc.isenabled()
