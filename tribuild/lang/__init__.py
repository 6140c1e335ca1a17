"""The .tri language: lexer, parser, syntax tree, names, types and shapes. Pure functions only.

This is what the rest of the compiler (``ir``, ``queries``, ``codegen``, the driver) and the
language server may use; the subpackages ``syntax``, ``check`` and ``builtins`` are
otherwise the language's own. ``ast``, ``dims``, ``types``, ``tokens``, ``items``, ``env``,
``values``, ``signature`` and ``checker`` are modules, used as namespaces. The *editor
surface*, for the language server and ``tribuild fmt``: ``LAYERS``, ``FUNCTIONS`` and
``SUMMARIES`` (the built-ins and their one-line docs), ``Token``, ``format_text`` (the
formatter).
"""

from tribuild.lang import dims, signature, types
from tribuild.lang.builtins.docs import SUMMARIES
from tribuild.lang.builtins.functions import FUNCTIONS
from tribuild.lang.builtins.layers import LAYERS, REQUIRED
from tribuild.lang.check import checker, env, values
from tribuild.lang.check.body import bind_dim_names, resolve
from tribuild.lang.check.calls import CallArgs, bind, call, new_ctx, subst_type
from tribuild.lang.check.checker import (
    CANNOT_INSTANTIATE,
    CheckedInstance,
    Members,
    check_instance,
    check_item,
    check_target_input,
    const_value_of,
    evaluate_generic_members,
    evaluate_members,
    example_input_dims,
    instance_key,
)
from tribuild.lang.check.codes import EXAMPLE_INPUT, Sink
from tribuild.lang.check.consteval import POISON, Ctx, arith, elements, evaluate, unary
from tribuild.lang.check.env import Env, ItemRef
from tribuild.lang.check.values import (
    Callee,
    Choice,
    InstanceKey,
    LayerV,
    Sym,
    TensorV,
    Trit,
    Unk,
    UnkList,
    Value,
    describe_instance,
    format_value,
    from_dim,
)
from tribuild.lang.signature import ParamSig, Signature, forward_of, signature_of
from tribuild.lang.syntax import ast, items, tokens
from tribuild.lang.syntax.free_names import free_names
from tribuild.lang.syntax.items import (
    Chunk,
    ItemEntry,
    ItemPlace,
    Pairs,
    chunked_items,
    item_tokens,
    lex_chunk,
    split_chunks,
    split_items,
)
from tribuild.lang.syntax.layout import format_text
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.locate import SourceMap, char_range, line_col
from tribuild.lang.syntax.parser import parse_item
from tribuild.lang.syntax.tokens import LexResult, Token
from tribuild.lang.types import ScalarT, TensorT

__all__ = [
    "EXAMPLE_INPUT", "LAYERS", "SUMMARIES", "Token", "example_input_dims", "format_text",
    "from_dim", "subst_type",
    "CANNOT_INSTANTIATE", "FUNCTIONS", "POISON", "REQUIRED", "CallArgs", "Callee",
    "CheckedInstance", "Choice", "Chunk", "Ctx", "Env", "InstanceKey", "ItemEntry", "ItemPlace",
    "ItemRef", "LayerV", "LexResult", "Members", "Pairs", "ParamSig", "ScalarT", "Signature",
    "Sink", "SourceMap", "Sym", "TensorT", "TensorV", "Trit", "Unk", "UnkList", "Value",
    "arith", "ast", "bind", "bind_dim_names", "call", "char_range", "check_instance",
    "check_item", "check_target_input", "checker", "chunked_items", "const_value_of",
    "describe_instance", "dims", "elements", "env", "evaluate", "evaluate_generic_members",
    "evaluate_members", "format_value", "forward_of", "free_names", "instance_key",
    "item_tokens", "items", "lex", "lex_chunk", "line_col", "new_ctx", "parse_item", "resolve",
    "signature", "signature_of", "split_chunks", "split_items", "tokens", "types", "unary",
    "values",
]  # fmt: skip
