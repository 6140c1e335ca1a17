"""`tribuild watch`: file events, the rebuild loop and its screens."""
