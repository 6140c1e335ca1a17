"""The syntax of .tri: tokens, the lexer, items, the parser and its tree."""
