"""The names of every built-in: layer constructors (``builtins_layers``) and functions
(``builtins_fns``). A user item of the same name shadows a built-in."""

from __future__ import annotations

from tribuild.lang.builtins.functions import FUNCTIONS
from tribuild.lang.builtins.layers import LAYERS

BUILTIN_NAMES = frozenset(FUNCTIONS) | frozenset(LAYERS)
