"""Unit tests: pure logic, no servers, no subprocesses."""
