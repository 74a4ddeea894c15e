"""Course retrieval: the retrievers under test and the 0-3 relevance judge."""
