"""Course retrieval metrics (NDCG@K, P@K, MRR) and run comparison."""
