"""Registers every value type the queries return with the engine's codec, so the persistent
store can save and reload them without pickle (the codec decodes only registered classes)."""

from __future__ import annotations

import enum
from types import ModuleType

from tribuild.base.record import is_record
from tribuild.engine import codec


def value_classes(module: ModuleType) -> list[type]:
    """The records and enums defined in ``module``."""
    out = []
    for obj in vars(module).values():
        if not isinstance(obj, type) or obj.__module__ != module.__name__:
            continue
        if is_record(obj) or issubclass(obj, enum.Enum):
            out.append(obj)
    return out


def register_values(modules: tuple[ModuleType, ...]) -> None:
    for module in modules:
        codec.register_all(value_classes(module))
