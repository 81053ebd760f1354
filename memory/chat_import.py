"""Placeholder (issue 15): built on its own branch."""
