"""Qdrant Edge embedded in this process: the Index port over it (`index`), its calls
(`engine`), its shards on disk (`shards`)."""
