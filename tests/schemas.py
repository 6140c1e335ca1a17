"""Validation of tribuild's JSON output against the schemas it documents (docs/schemas/)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
SARIF = Path(__file__).resolve().parent / "fixtures" / "sarif" / "sarif-2.1.0-rtm.5.json"


@cache
def _validator(name: str):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


def validate(name: str, data: object) -> None:
    """Raise jsonschema's ValidationError unless ``data`` fits docs/schemas/NAME.schema.json."""
    _validator(name).validate(data)


def validate_sarif(data: object) -> None:
    """Against the SARIF 2.1.0 schema (tests/fixtures/sarif, from OASIS via
    @microsoft/jest-sarif)."""
    from jsonschema import Draft4Validator

    Draft4Validator(json.loads(SARIF.read_text())).validate(data)
