"""The bundled prompt sets as package data (one JSONL file per category; see ``LICENSE.md``)."""
