"""The 8-bit float layers (``tribuild.runtime.int8``, issue 34): the kernels of ``int8.cpp``
against a float64 oracle on odd shapes, on every ISA this machine runs plus the portable one;
the row quantization the same on the kernels and in torch; on the generated BitNet LM, a tied
embedding and head sharing one table, logits within the 8-bit tolerance of the float ones and
the same greedy tokens, and ``last_only`` steps giving the last position's logits alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.codegen.harness import build as build_module  # noqa: E402
from tests.codegen.harness import write_and_import  # noqa: E402
from tests.runtime.test_lean import float_state, packed_folder  # noqa: E402
from tribuild.runtime import int8, native  # noqa: E402
from tribuild.runtime.checkpoint import load_checkpoint  # noqa: E402
from tribuild.runtime.decoding import KVCache  # noqa: E402
from tribuild.runtime.kernels.cpu import build  # noqa: E402

HAVE_COMPILER = build.find_compiler() is not None
RUNNABLE = [isa for isa in build.ISAS if build.supported(isa, build.cpu_flags())]
# (rows, N, K): K below and not a multiple of the 8-wide vector, N of 1 and not a multiple of
# the 4 channels a pass shares, the decode path (1 row), row blocks of 4 with a remainder, 300.
SHAPES = [(1, 1, 1), (1, 4, 8), (1, 5, 13), (1, 8, 17), (1, 9, 4100), (2, 3, 7), (3, 9, 257)]
SHAPES += [(5, 33, 2560)]  # (1, 9, 4100): two int32 flushes and a tail past the last vector
SHAPES += [(17, 6, 100), (300, 7, 131)]


@pytest.fixture(scope="module", params=RUNNABLE)
def lib(request):
    if not HAVE_COMPILER:
        pytest.skip("no C++ compiler")
    return build.build_and_load(request.param)


def weight(n: int, k: int, seed: int) -> torch.Tensor:
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.02
    if n > 2:
        w[2] = 0.0  # a row of zeros: scale 0
    return w


def kernel_quantize(lib, w: torch.Tensor) -> int8.Rows:
    n, k = w.shape
    assert lib.cdll.tb_i8_panel_bytes(n, k) == torch.Size(int8.panel_shape(n, k)).numel()
    panel, scale = torch.full(int8.panel_shape(n, k), 99, dtype=torch.int8), torch.empty(n)
    lib.cdll.tb_i8_quantize(w.data_ptr(), n, k, panel.data_ptr(), scale.data_ptr(), 2)
    return int8.Rows(panel, scale, (n, k))


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_the_product_matches_a_float64_oracle(lib, m, n, k):
    rows = kernel_quantize(lib, weight(n, k, m + n + k))
    codes, scale = rows.codes(), rows.scale
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(k))
    out = torch.empty(m, n)
    lib.cdll.tb_i8_linear(
        x.data_ptr(), m, k, rows.panel.data_ptr(), scale.data_ptr(), n, out.data_ptr(), 2
    )
    weights = codes.double() * scale.double()[:, None]
    oracle = x.double() @ weights.T
    if m == 1 and lib.isa != "portable":  # decoding: x as int16
        xs = x.abs().max() / 32767.0  # float32, as the kernel divides
        rounded = ((x / xs).round() * xs).double() if xs > 0 else torch.zeros_like(x).double()
        oracle = rounded @ weights.T
    # float32 sums of k products: a few units in the last place of the largest partial sum
    bound = 1e-6 * k * (x.abs().max() * codes.abs().max() * scale.max()).item() + 1e-30
    assert (out.double() - oracle).abs().max().item() <= bound


@pytest.mark.parametrize("n,k", [(1, 1), (5, 13), (9, 257), (64, 2560)])
def test_the_row_quantization_is_the_same_on_the_kernels_and_in_torch(lib, n, k):
    w = weight(n, k, n * k)
    w[0, 0] = 0.5  # a row whose absmax is exact
    rows = kernel_quantize(lib, w)
    codes, scale = rows.codes(), rows.scale
    # the panel's padding (k up to 16, channels up to 4) is codes 0, whatever was there
    assert torch.equal(int8.Rows.from_codes(codes, scale).panel, rows.panel)
    ids = torch.tensor([[n - 1, 0], [n // 2, n - 1]])  # an embedding's lookup of the panel
    assert torch.equal(rows.lookup(ids), codes[ids])
    amax = w.abs().amax(dim=1)
    expected_scale = amax / 127.0
    assert torch.equal(scale, expected_scale)
    safe = torch.where(expected_scale > 0, expected_scale, torch.ones_like(expected_scale))
    expected = torch.where(expected_scale[:, None] > 0, (w / safe[:, None]).round(), 0.0)
    assert torch.equal(codes, expected.clamp(-127, 127).to(torch.int8))
    # and quantize_rows, whichever way it runs here, gives those codes
    found_codes, found_scale = int8.quantize_rows(w)
    assert torch.equal(found_codes, codes) and torch.equal(found_scale, scale)


ENTRY = "models/bitnet_lm.tri:BitNetLM"
ARGS = dict(vocab=96, dim=64, layers=2, heads=4, kv_heads=2, hidden=160)


@pytest.fixture(scope="module")
def Model(tmp_path_factory):
    return write_and_import(build_module(ENTRY, ARGS, "3"), tmp_path_factory.mktemp("lm8")).Model


def ids(n: int = 7) -> torch.Tensor:
    return torch.arange(n).reshape(1, n) * 5 % ARGS["vocab"]


def test_a_tied_lm_holds_one_8_bit_table_and_its_logits_stay_close(Model, tmp_path):
    packed_folder(Model, tmp_path)
    plain = load_checkpoint(Model, tmp_path)
    small = load_checkpoint(Model, tmp_path, int8_floats=True)  # MIN_WEIGHTS: checked below
    assert type(small.lm_head) is torch.nn.Linear  # 96 x 64 weights: not worth 8 bits
    model = int8.quantize_floats(load_checkpoint(Model, tmp_path), min_weights=1)
    head, embed = model.lm_head, model.model.embed_tokens
    assert isinstance(head, int8.Int8Linear) and isinstance(embed, int8.Int8Embedding)
    assert head.rows is embed.rows and head.head
    assert not any(p.is_floating_point() and p.dim() == 2 for p in model.parameters())
    with torch.no_grad():
        expected, found = plain(ids()), model(ids())
    # the weight's rounding: half a step of max|row| / 127, relative to the logits' range
    assert (found - expected).abs().max() <= 0.02 * expected.abs().max()
    with torch.no_grad():
        assert torch.equal(model.generate(ids(), 6), plain.generate(ids(), 6))
    assert "codes" in "".join(model.state_dict()) and "lm_head.weight" not in model.state_dict()


def test_a_mapped_embedding_reads_the_checkpoints_rows_exactly(Model, tmp_path):
    """What load_checkpoint(int8_floats=True) does with an embedding: rows read from the file's
    own tensor (bfloat16 here, as bitnet-b1.58-2B-4T ships it), not 8-bit ones; the tied head
    still gets its 8-bit table."""
    from tribuild.runtime.safetensors_io import entries

    packed_folder(Model, tmp_path)
    plain = load_checkpoint(Model, tmp_path)
    table = entries(tmp_path / "model.safetensors")["model.embed_tokens.weight"].map(populate=False)
    model = load_checkpoint(Model, tmp_path)
    int8.quantize_floats(model, min_weights=1, mapped={"model.embed_tokens": table})
    embed, head = model.model.embed_tokens, model.lm_head
    assert isinstance(embed, int8.MappedEmbedding) and isinstance(head, int8.Int8Linear)
    with torch.no_grad():
        assert torch.equal(embed(ids()), plain.model.embed_tokens(ids()))
        hidden = plain.model(ids())
        torch.testing.assert_close(model(ids()), head(hidden), rtol=0, atol=0)


def test_a_last_only_step_gives_the_last_positions_logits(Model, tmp_path):
    model = int8.quantize_floats(Model.from_float(float_state(Model)), min_weights=1)
    with torch.no_grad():
        whole = KVCache(7)
        with whole.step():
            all_rows = model(ids())
        last = KVCache(7, last_only=True)
        with last.step():
            one_row = model(ids())
        plain = model(ids())  # outside a step: every position, as the source says
    assert all_rows.shape == plain.shape == (1, 7, ARGS["vocab"])
    assert one_row.shape == (1, 1, ARGS["vocab"])
    # one row decodes with int16 activations (see int8.cpp's *product*), several with float32
    bound = 1e-4 * all_rows[:, -1].abs().max().item()
    torch.testing.assert_close(one_row[:, 0], all_rows[:, -1], rtol=0, atol=bound)


def test_the_8_bit_layers_run_without_the_kernels(Model, monkeypatch):
    model = int8.quantize_floats(Model.from_float(float_state(Model)), min_weights=1)
    with torch.no_grad():
        native_out = model(ids())
        monkeypatch.setattr(native, "library", lambda *_: None)
        torch_out = model(ids())
    torch.testing.assert_close(torch_out, native_out, rtol=1e-4, atol=1e-4)


def test_quantize_floats_refuses_a_model_in_training_mode(Model):
    with pytest.raises(ValueError, match="for inference"):
        int8.quantize_floats(Model.from_float(float_state(Model)).train())


class Head(torch.nn.Module):
    def __init__(self, n: int = 37, k: int = 70):
        super().__init__()
        self.head = int8.Int8Linear(int8.Rows.quantize(weight(n, k, 3)), torch.randn(n))

    def forward(self, x):
        return self.head(x) * 2


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C++ compiler")
def test_the_head_follows_the_backend_choice():
    from tribuild.runtime import launch

    layer, x = Head(), torch.randn(2, 70)
    rows = layer.head.rows
    dense = (
        torch.nn.functional.linear(x, rows.codes().float() * rows.scale[:, None]) + layer.head.bias
    ) * 2
    with launch.force_backend("torch"):
        assert torch.equal(layer(x), dense)
    with launch.force_backend("cpu"):  # the kernel: float32 sums in its own order
        torch.testing.assert_close(layer(x), dense, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C++ compiler")
def test_a_traced_head_is_the_cpu_int8_operator():
    from tribuild.runtime import launch

    layer = Head()
    for x in (torch.randn(3, 70), torch.randn(1, 70)):  # several rows, and decoding's one
        with launch.force_backend("cpu"), torch.no_grad():
            eager = layer(x)
            exported = torch.export.export(layer, (x,))
            targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
            assert "tribuild.cpu_int8_linear.default" in targets
            assert torch.equal(exported.module()(x), eager)
            compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
            assert torch.equal(compiled(x), eager)
    rows = layer.head.rows
    torch.library.opcheck(int8.CPU_INT8_LINEAR, (torch.randn(3, 70), rows.panel, rows.scale, 70))


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C++ compiler")
def test_empty_and_misshapen_inputs_end_as_torchs_layers_end():
    from tribuild.runtime import launch

    with launch.force_backend("cpu"), torch.no_grad():
        empty_and_misshapen_inputs()


def empty_and_misshapen_inputs():
    rows = int8.Rows.quantize(weight(10, 20, 5))
    embedding, head = int8.Int8Embedding(rows), int8.Int8Linear(rows)
    assert embedding(torch.zeros(0, dtype=torch.long)).shape == (0, 20)  # as nn.Embedding
    assert embedding(torch.zeros(2, 0, dtype=torch.long)).shape == (2, 0, 20)
    assert head(torch.randn(0, 20)).shape == (0, 10)
    # x of 30 columns for a layer of 20: 15 rows of 20, past the 10 rows of output it has room
    # for (the kernel wrote them: a heap overflow); nn.Linear refuses the shape
    with pytest.raises(ValueError, match="in_features 20.*30 columns"):
        head(torch.randn(10, 30))
    with pytest.raises(ValueError, match="in_features 20.*30 columns"):
        int8.CPU_INT8_LINEAR(torch.randn(10, 30), rows.panel, rows.scale, 20)
    # K of 0: every output is 0, as F.linear gives (not torch.empty's leftovers)
    nothing = int8.Rows.quantize(torch.empty(6, 0))
    assert nothing.codes().shape == (6, 0)
    assert torch.equal(int8.Int8Linear(nothing)(torch.randn(3, 0)), torch.zeros(3, 6))


@pytest.mark.skipif(not HAVE_COMPILER, reason="no C++ compiler")
@pytest.mark.parametrize("m", [1, 3])
def test_a_nan_or_inf_activation_reaches_the_logits_as_in_float(m):
    from tribuild.runtime import launch

    # decoding rounds x to int16 by its largest |x|: a NaN or inf there made every code
    # static_cast<int16_t>(NaN) (undefined; finite logits out of a NaN hidden state)
    layer = int8.Int8Linear(int8.Rows.quantize(weight(9, 43, 7)))
    rows = layer.rows
    dense = rows.codes().float() * rows.scale[:, None]
    bads = (float("nan"), float("inf"), -float("inf"))
    for bad, at in [(bad, at) for bad in bads for at in (3, 41)]:  # a vector of 8, the tail
        x = torch.randn(m, 43)
        x[0, at] = bad
        with launch.force_backend("cpu"), torch.no_grad():
            out = layer(x)
        expected = x @ dense.T
        assert torch.equal(out.isnan(), expected.isnan()), bad
        assert torch.equal(out.isposinf(), expected.isposinf()), bad
        assert torch.equal(out.isneginf(), expected.isneginf()), bad


# subnormal: amax / 32767 rounds down to 1, 2 or 21 units of the smallest subnormal
@pytest.mark.parametrize("units", [1.4, 2.3, 21.3])
def test_a_subnormal_decoding_row_stays_close(lib, units):
    """One row (decoding) whose largest value is subnormal: its int16 scale would be a
    subnormal of a few bits, and x / scale pass 32767 (an int16 cast past its range is
    undefined: the row's largest values came out wrong by up to a third), so the row takes
    the float path."""
    n, k = 4, 32
    amax = 32767 * units * float(torch.finfo(torch.float32).smallest_normal) * 2.0**-23
    rows = kernel_quantize(lib, weight(n, k, 11) + 0.01)
    x = torch.linspace(-1.0, 1.0, k).reshape(1, k) * amax
    x[0, -1] = amax
    out = torch.empty(1, n)
    lib.cdll.tb_i8_linear(
        x.data_ptr(), 1, k, rows.panel.data_ptr(), rows.scale.data_ptr(), n, out.data_ptr(), 1
    )
    oracle = x.double() @ (rows.codes().double() * rows.scale.double()[:, None]).T
    assert (out.double() - oracle).abs().max() <= 0.1 * oracle.abs().max()
