"""What `tribuild build --dump-ast` and ``--dump-ir`` print: the trees and graphs of a build.

Terms:
- *AST block*: a header ``# ==> PATH:ITEM <==``, then the item's parsed tree, pretty-printed.
- *instance block*: a header ``# ==> TARGET: INSTANCE (PATH) -OLEVEL <==``, then the lines of
  its optimised graph (``tribuild.ir.text``). An instance with no graph says why instead. A
  target's instances come in ``reached_instances`` order, root first; targets in build order,
  those that failed left out.
"""

from __future__ import annotations

from tribuild.ir.text import graph_lines
from tribuild.lang import describe_instance
from tribuild.queries.lower import optimized_ir
from tribuild.queries.syntax import item_ast, item_index
from tribuild.queries.targets import reached_instances, target_report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.config.load import Target
    from tribuild.driver.build import BuildResult
    from tribuild.driver.session import Project
    from tribuild.engine import Database


def ast_text(result: BuildResult) -> str:
    """The AST block of every item of every input the build read."""
    import pprint

    assert result.sources is not None  # set by every build that read its sources
    db = result.sources.db
    blocks = []
    for path in result.inputs:
        for entry in item_index(db, path):
            tree = item_ast(db, path, entry.id).item
            blocks.append(f"# ==> {path}:{entry.id} <==\n{pprint.pformat(tree, width=100)}\n")
    return "".join(blocks)


def ir_text(project: Project, result: BuildResult) -> str:
    """The optimised IR of every instance of each target that built, in target order."""
    assert result.sources is not None  # set by every build that read its sources
    db = result.sources.db
    configured = {t.name: t for t in project.configured.targets}
    return "".join(
        target_ir(db, configured[target.name], result.opt_level)
        for target in result.targets
        if not target.failed
    )


def target_ir(db: Database, target: Target, opt_level: str) -> str:
    """The instance blocks of every instance ``target`` (a config Target) builds."""
    report = target_report(db, target.entry_path, target.entry_layer, target.args, target.input)
    if report.root is None:
        return ""
    lines = []
    for key, _ in reached_instances(db, report.root).instances:
        lines.append(
            f"# ==> {target.name}: {describe_instance(key)} ({key.path}) -O{opt_level} <=="
        )
        lowered = optimized_ir(db, key, opt_level)
        if lowered.graph is None:
            reasons = "; ".join(d.message for d in lowered.diagnostics) or "it has errors"
            lines.append(f"no IR: {reasons}")
        else:
            lines += graph_lines(lowered.graph)
    return "\n".join(lines) + "\n"
