"""The compiler stages as queries: the only package that knows both the engine and the compiler.

Each module wraps the pure functions of ``tribuild.lang`` in memoized queries at the
granularity the incremental build needs (see each module's docstring):
``inputs`` (what the driver sets), ``syntax`` (lex, items, parse), ``names`` (imports and
scopes), ``semantic`` (signatures, checks, instances), ``targets`` (what a target
reaches), ``report`` (every diagnostic of a file).
Importing this package registers every value type those queries return with the engine's
codec, so the persistent store can hold them.
"""

from tribuild import diagnostics
from tribuild.codegen import kernels as codegen_kernels
from tribuild.ir import graph as ir_graph
from tribuild.lang import ast, dims, env, items, signature, tokens, types, values
from tribuild.lang import checker as check
from tribuild.queries import codegen, inputs, lower, names, report, semantic, syntax, targets
from tribuild.queries.registry import register_values

register_values(
    (
        diagnostics,
        ast,
        check,
        dims,
        env,
        items,
        signature,
        tokens,
        types,
        values,
        inputs,
        names,
        report,
        semantic,
        syntax,
        targets,
        ir_graph,
        codegen_kernels,
        lower,
        codegen,
    )
)
