"""The decoding runtime (tribuild/runtime/decoding.py, generate.py) on its own: a KV cache step
computes what the whole sequence computes, in one step or several, and refuses what it
cannot hold."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tribuild.runtime import decoding  # noqa: E402
from tribuild.runtime.generate import generate, pick  # noqa: E402


def qkv(t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(2, 6, t, 8, generator=gen),
        torch.randn(2, 3, t, 8, generator=gen),
        torch.randn(2, 3, t, 8, generator=gen),
    )


def layer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return decoding.attention(decoding.rope(q, 100.0), decoding.rope(k, 100.0), v, True)


@pytest.mark.parametrize("chunks", [(7,), (3, 4), (1, 1, 5), (1,) * 7])
def test_steps_compute_the_whole_sequence(chunks):
    q, k, v = qkv(7)
    whole = layer(q, k, v)
    cache = decoding.KVCache(7)
    parts, start = [], 0
    for n in chunks:
        with cache.step():
            parts.append(layer(*(x[:, :, start : start + n] for x in (q, k, v))))
        start += n
    assert cache.offset == 7
    torch.testing.assert_close(torch.cat(parts, dim=2), whole, rtol=1e-5, atol=1e-6)


def test_grouped_query_heads_read_their_group():
    q, k, v = qkv(4)
    found = decoding.attention(q, k, v, False)
    for h in range(6):
        one = torch.softmax(q[:, h] @ k[:, h // 2].transpose(-2, -1) / 8**0.5, -1) @ v[:, h // 2]
        torch.testing.assert_close(found[:, h], one, rtol=1e-5, atol=1e-6)


def test_rope_rotates_pairs_by_position():
    x = torch.randn(1, 1, 5, 4)
    y = decoding.rope(x, 10.0)
    for p in range(5):
        for i in range(2):
            angle = torch.tensor(p * 10.0 ** (-2 * i / 4))
            a, b = x[0, 0, p, i], x[0, 0, p, i + 2]
            expected = (a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin())
            torch.testing.assert_close((y[0, 0, p, i], y[0, 0, p, i + 2]), expected)


def test_a_full_cache_refuses_more_positions():
    cache = decoding.KVCache(3)
    q, k, v = qkv(4)
    with pytest.raises(ValueError, match="holds 3 positions; this step needs 4"):
        with cache.step():
            decoding.attention(q, k, v, True)
    with pytest.raises(ValueError, match="at least 1 position"):
        decoding.KVCache(0)


def test_no_cache_outside_a_step():
    cache = decoding.KVCache(4)
    with cache.step():
        assert decoding.active() is cache
    assert decoding.active() is None


def test_generate_checks_its_arguments():
    model = torch.nn.Sequential(torch.nn.Embedding(5, 5))
    ids = torch.tensor([[1, 2]])
    for bad, match in (
        (dict(max_new_tokens=-1), "max_new_tokens"),
        (dict(max_new_tokens=1, temperature=-1.0), "temperature"),
        (dict(max_new_tokens=1, top_k=0), "top_k"),
    ):
        with pytest.raises(ValueError, match=match):
            generate(model, ids, **bad)
    with pytest.raises(ValueError, match=r"\[batch, tokens\]"):
        generate(model, torch.tensor([1, 2]), 1)
    with pytest.raises(ValueError, match=r"0\.\.4"):
        generate(model, torch.tensor([[7]]), 1)


def test_pick_top_k_keeps_only_the_largest():
    logits = torch.tensor([[0.0, 5.0, 4.9, -1.0]])
    gen = torch.Generator().manual_seed(0)
    picks = {int(pick(logits, 10.0, 2, gen)) for _ in range(200)}
    assert picks == {1, 2}
    assert int(pick(logits)) == 1
