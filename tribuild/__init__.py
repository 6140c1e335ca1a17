"""tribuild: an incremental, query-based compiler for ternary neural networks."""
