"""A Qdrant server or cluster (or qdrant-client's local mode) through `AsyncQdrantClient`."""
