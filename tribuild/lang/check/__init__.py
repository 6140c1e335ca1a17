"""The type and shape checker: construction-time values, abstract tensors, diagnostics."""
