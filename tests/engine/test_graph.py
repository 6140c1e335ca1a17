import subprocess
import sys

from tribuild.engine import Durability, derived

from .pipelines import length, text


@derived
def total(db):
    return length(db, "a") + length(db, "b")


def test_graph_has_every_key_and_an_edge_from_each_dependency(db):
    db.set(text, "a", "xx")
    db.set(text, "b", "y", durability=Durability.HIGH)
    total(db)
    g = db.graph()
    assert set(g.nodes) == {
        ("text", ("a",)),
        ("text", ("b",)),
        ("length", ("a",)),
        ("length", ("b",)),
        ("total", ()),
    }
    assert set(g.edges) == {
        (("text", ("a",)), ("length", ("a",))),
        (("text", ("b",)), ("length", ("b",))),
        (("length", ("a",)), ("total", ())),
        (("length", ("b",)), ("total", ())),
    }
    assert g.nodes["length", ("b",)]["durability"] == Durability.HIGH
    assert g.nodes["total", ()]["durability"] == Durability.LOW
    assert g.nodes["text", ("a",)]["input"] and not g.nodes["total", ()]["input"]


NO_NETWORKX = """
import sys
from tribuild.engine import Database, derived, input_query
@input_query
def text(db, name): ...
@derived
def length(db, name):
    return len(text(db, name))
db = Database()
db.set(text, "a", "xyz")
assert length(db, "a") == 3
db.set(text, "a", "xyzw")
assert length(db, "a") == 4
db.why(length, "a"), db.explain(length, "a"), db.stats()
assert "networkx" not in sys.modules, "the engine imported networkx"
"""


def test_running_queries_never_imports_networkx():
    subprocess.run([sys.executable, "-c", NO_NETWORKX], check=True)
