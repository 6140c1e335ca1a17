"""Optimization passes: each a pure function ``Graph -> Graph`` in its own module, with its
terms in the module docstring. ``tribuild.ir.pipeline`` orders them per level."""
