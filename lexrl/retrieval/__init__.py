"""Retrieval tools the envs call: BM25 now; dense and rerankers behind the same `search`."""
