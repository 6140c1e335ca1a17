"""`tribuild watch`: file events (``events``), the rebuild loop (``loop``) and its screens
(``screen``).

What the rest may use (the command line): ``Watcher`` with its ``Options``, and
``choose_screen``.
"""

from tribuild.watch.loop import Options, Watcher
from tribuild.watch.screen import choose as choose_screen

__all__ = ["Options", "Watcher", "choose_screen"]
