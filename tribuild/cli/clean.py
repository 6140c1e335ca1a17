"""`tribuild clean`: delete the outputs tribuild wrote (``tribuild.driver.clean``), and say
which were kept and why."""

from __future__ import annotations

from tribuild.cli import shared
from tribuild.project import EXIT_OK

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    pass  # no options


def run(args) -> int:
    from tribuild.driver.clean import clean_project

    removed, kept = clean_project(shared.project(), shared.say)
    shared.say(f"removed {len(removed)} files")
    for rel, why in kept:
        shared.say(f"kept {rel}: {why}")
    return EXIT_OK
