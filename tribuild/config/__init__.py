"""Tribuild.toml: load, validate, locate keys, and explain every mistake."""
