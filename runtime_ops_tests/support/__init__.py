"""Helpers the tests (and bench/) import: real servers, stub HTTP servers, processes, corpora; no tests here."""
