"""The model registry in the state store: model versions and aliases (fenced writes), content-addressed artifacts
and evaluation reports."""
