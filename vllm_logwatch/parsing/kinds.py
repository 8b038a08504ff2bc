"""The kinds of records `logwatch parse --kind` writes: one list for the command line and the writers
(this module imports nothing, so the command line is built without the parser's models)."""

from __future__ import annotations

RECORD_KINDS: tuple[str, ...] = (
    "stats", "spec", "transfer", "mfu", "info", "access", "log", "iterations", "requests", "all")
"""`all` is every kind at once."""
