"""Built-in layers and functions: their parameters and typing and shape rules."""
