"""Persistence: the on-disk store, its packs and columns, the codec, and worker merges."""
