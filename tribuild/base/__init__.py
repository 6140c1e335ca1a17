"""Small standard-library helpers: records, hashing, files, temporary names, GC pauses."""
