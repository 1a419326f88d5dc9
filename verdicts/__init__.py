"""Stored verdicts: one per recomputation of an experiment, superseded, never edited."""
