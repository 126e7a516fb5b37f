"""Fixtures of the integration tier that only its tests use (the servers shared by the tiers are in the root
conftest.py)."""

from __future__ import annotations

import pytest

from runtime_ops_tests.support.seeded_corpora import CorpusTemplates


@pytest.fixture(scope="session")
def corpus_templates(tmp_path_factory: pytest.TempPathFactory) -> CorpusTemplates:
    """Synthetic corpora with trained lsa models, built once per session: `.postgres(server, chunks, seeds)` (a
    context manager) and `.sqlite(path, chunks, seeds)` give a test its own copy (seeded_corpora.py)."""
    return CorpusTemplates(tmp_path_factory.mktemp("corpora"))
