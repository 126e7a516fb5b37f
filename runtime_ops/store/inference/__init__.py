"""Inference results of the labelling pipeline (`runtime_ops.inference`)."""
