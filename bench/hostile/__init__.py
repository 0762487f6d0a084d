"""Hostile requests, the error sweep and the runner that judges their answers (issue 36)."""
