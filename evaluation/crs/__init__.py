"""Metrics and evaluation nodes of the movie recommender: grounded TAS, TAS/CAS, topics, coverage and recall."""
