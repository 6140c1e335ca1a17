"""``tribuild.runtime.model.ModuleList``: ``nn.ModuleList``'s items, keys and indexing (the fast
int path and everything it hands to PyTorch), after edits that renumber the items."""

import pytest
from torch import nn

from tribuild.runtime.model import ModuleList


def layers(n: int) -> list[nn.Module]:
    return [nn.Linear(1, i + 1) for i in range(n)]


def test_indexing_agrees_with_nn_module_list():
    items = layers(4)
    ours, theirs = ModuleList(items), nn.ModuleList(items)
    for idx in [0, 1, 3, -1, -4, slice(1, 3), slice(None, None, -1)]:
        got, want = ours[idx], theirs[idx]
        assert (list(got) == list(want)) if isinstance(idx, slice) else got is want
    assert isinstance(ours[1:], ModuleList)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for idx in [4, -5]:
        with pytest.raises(IndexError):
            ours[idx]


def test_indexing_follows_edits_that_renumber():
    items = layers(4)
    ours = ModuleList(items)
    del ours[0]
    assert ours[0] is items[1] and ours[2] is items[3]
    ours.insert(1, items[0])
    assert [ours[i] for i in range(4)] == [items[1], items[0], items[2], items[3]]
    ours[3] = items[2]
    assert ours[3] is items[2]
    with pytest.raises(IndexError):
        ours[4]
