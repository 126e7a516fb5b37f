"""Serving in the state store: vector indexes (and the serving `retrieval_index` alias's index rows) and answers."""
