"""Vector stores: one index of chunk vectors per (pipeline, model version), searched by cosine similarity."""
