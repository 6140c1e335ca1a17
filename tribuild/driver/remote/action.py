"""Action keys: per target, a digest of everything its generated files depend on; and the
import lists that give a target's import closure without lexing its files.

The key covers tribuild's version salt (the digest of its own source), the target's name,
entry file and layer, construction arguments, input shape and ``-O`` level, and the path
(relative to the project root) and content digest of every ``.tri`` file in the entry's
import closure. The depfile is not part of the entry: it names this checkout's output
folder and Tribuild.toml, so each build renders it itself (``build.target_files``).

Terms:
- *import list*: the files one file imports (``queries.names.import_targets``), a pure
  function of tribuild's version, the file's path (imports resolve relative to it) and its
  text. Stored on the remote under ``imports_digest`` of those three, as an entry framed like
  an action entry, so that a fresh clone finds the import closures of the targets it takes
  from the remote without lexing a file: on a project of 20,000 lines, lexing was a fifth of
  such a build.
"""

from __future__ import annotations

from tribuild.config.load import Target
from tribuild.engine import codec
from tribuild.remote import entries

VERSION = 1  # of the key's layout and of the action entry's body


def action_digest(salt: str, target: Target, opt_level: str, files: list[tuple[str, str]]) -> str:
    """The action key of ``target`` at ``opt_level`` whose import closure is ``files``
    (path, content digest), sorted by path."""
    what = (
        target.name,
        target.entry_path,
        target.entry_layer,
        target.args,
        target.input,
        opt_level,
    )
    return entries.content_digest(codec.encode((VERSION, salt, what, tuple(files))))


def imports_digest(salt: str, path: str, text_digest: str) -> str:
    """Where the import list of the file ``path`` whose text has ``text_digest`` is kept."""
    return entries.content_digest(codec.encode((VERSION, salt, "imports", path, text_digest)))
