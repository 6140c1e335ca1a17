"""`tribuild lsp`: a Language Server Protocol server over the same query database as the
build (pygls; the ``lsp`` extra). ``server`` is the protocol glue; the other modules answer
one kind of request each from the database, and know nothing of pygls.

What the rest may use (the command line): ``server.serve``, imported only when the server
starts, so that a missing ``lsp`` extra is reported then.
"""
