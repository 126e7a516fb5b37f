"""Embedders: the models that turn chunks and questions into vectors, and loading a registered version."""
