"""References of models/blocks/*.tri, one module per file, named after the file's stem."""
