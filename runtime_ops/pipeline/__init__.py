"""Retrieval pipelines, one per defs/<name>/defs.yaml (RetrievalPipeline components)."""
