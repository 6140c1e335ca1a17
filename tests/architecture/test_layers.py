"""ARCHITECTURE.md's layers hold in the code's own imports (``layers``): no import runs back
up, the runtime imports only itself, ``base`` and ``remote``, ``lang`` never imports the
engine, only ``cli`` knows argparse, only ``lsp`` the protocol, and the packages with a
facade are reached through it. Each rule is also shown catching an offending import."""

from __future__ import annotations

import pytest

from tests.architecture.layers import RANKS, imports, modules, tree_violations, unit_of, violations


def test_the_tree_keeps_every_rule():
    assert tree_violations() == []


def test_every_unit_has_its_place_in_the_layers():
    """A new package or top-level module must be placed in ``RANKS`` (and the drawing)."""
    assert {unit_of(name) for name, _ in modules()} == set(RANKS)


OFFENDING = [
    # (module, source, what the rule says)
    ("tribuild.lang.types", "from tribuild.engine import Database", "engine is not below lang"),
    ("tribuild.engine.fetch", "from tribuild.lang import ast", "lang is not below engine"),
    ("tribuild.runtime.autotune", "from tribuild.driver.remote import stats", "imports only"),
    ("tribuild.runtime.nn", "from tribuild.project import OPT_LEVELS", "runtime imports only"),
    ("tribuild.runtime.ops", "import tribuild.queries.lower", "runtime imports only"),
    ("tribuild.ir.text", "from tribuild.queries.lower import optimized_ir", "runs back up"),
    ("tribuild.driver.build", "from tribuild.cli import shared", "runs back up"),
    ("tribuild.remote.link", "from tribuild.config.remote import RemoteSettings", "runs back up"),
    ("tribuild.watch.loop", "from tribuild.lsp import server", "lsp is not below watch"),
    ("tribuild.driver.check", "import argparse", "only cli may import argparse"),
    ("tribuild.queries.editor", "from lsprotocol import types", "only lsp may import lsprotocol"),
    ("tribuild.driver.api", "from pygls.server import LanguageServer", "only lsp may import"),
    ("tribuild.codegen.module", "import torch", "may import torch"),
    ("tribuild.driver.build", "import triton", "only runtime may import triton"),
    ("tribuild.driver.build", "from tribuild.runtime import launch", "compiler imports of the"),
    ("tribuild.queries.codegen", "import tribuild.runtime", "compiler imports of the runtime"),
    ("tribuild.lsp.hover", "from tribuild.lang.syntax import ast", "go through tribuild.lang"),
    ("tribuild.driver.session", "from tribuild.engine.fingerprint import package_hash", "go"),
    ("tribuild.driver.remote.check", "from tribuild.remote.link import Link", "go through"),
    ("tribuild.lang.check.body", "from tribuild.newthing import x", "has no place in the layers"),
    # wherever the import stands: in a function, under TYPE_CHECKING
    ("tribuild.lang.check.calls", "def f():\n    from tribuild.queries import names\n", "runs"),
    ("tribuild.ir.graph", "if TYPE_CHECKING:\n    from tribuild.codegen import kernels\n", "runs"),
    # relative imports are resolved
    ("tribuild.lang.types", "from ..engine import Database", "engine is not below lang"),
]


@pytest.mark.parametrize(("module", "source", "said"), OFFENDING)
def test_an_offending_import_is_caught(module, source, said):
    found = violations(module, imports(source, module))
    assert len(found) == 1 and said in found[0], found


ALLOWED = [
    ("tribuild.driver.build", "from tribuild.queries.targets import target_report"),
    ("tribuild.lsp.hover", "from tribuild.lang import LAYERS, ast"),
    ("tribuild.runtime.tuning", "from tribuild.remote import Link, entries"),
    ("tribuild.driver.cpu_kernels", "from tribuild.runtime.kernels.cpu import build"),
    ("tribuild.runtime.launch", "import torch\nfrom tribuild.base.record import record"),
    ("tribuild.cli.build", "import argparse\nfrom tribuild.driver import dump"),
    ("tribuild.lang.check.body", "from tribuild.lang.check import calls\nimport os"),
]


@pytest.mark.parametrize(("module", "source"), ALLOWED)
def test_what_the_layers_allow_passes(module, source):
    assert violations(module, imports(source, module)) == []
