"""Action keys: per target, a digest of everything its generated files depend on.

The key covers tribuild's version salt (the digest of its own source), the target's name,
entry file and layer, construction arguments, input shape and ``-O`` level, and the path
(relative to the project root) and content digest of every ``.tri`` file in the entry's
import closure. The depfile is not part of the entry: it names this checkout's output
folder and Tribuild.toml, so each build renders it itself (``build.target_files``).
"""

from __future__ import annotations

from tribuild.config.load import Target
from tribuild.driver import depfile
from tribuild.driver.remote.entries import content_digest
from tribuild.engine.store import codec
from tribuild.queries.inputs import source_text

VERSION = 1  # of the key's layout and of the action entry's body


def action_digest(db, salt: str, target: Target, opt_level: str) -> str | None:
    """The action key of ``target`` at ``opt_level`` with the sources loaded in ``db``;
    None when a file of its closure cannot be read (the build reports that)."""
    files = []
    for path in depfile.import_closure(db, target.entry_path):
        text = source_text(db, path).text
        if text is None:
            return None
        files.append((path, content_digest(text.encode("utf-8"))))
    what = (
        target.name,
        target.entry_path,
        target.entry_layer,
        target.args,
        target.input,
        opt_level,
    )
    return content_digest(codec.encode((VERSION, salt, what, tuple(files))))
