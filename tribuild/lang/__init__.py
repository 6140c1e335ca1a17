"""The .tri language: lexer, parser, syntax tree, names, types and shapes. Pure functions only."""
