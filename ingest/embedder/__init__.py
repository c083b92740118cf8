"""The embedding model: dense MiniLM and BM25 vectors of passages and questions."""
