"""Per-engine knowledge, Django-free: flag tables, configuration documents, launch commands,
the importer and the linter.

* :mod:`specportal.engines.flags` — the flag tables (one source of truth) and
  ``parse_engine_argv`` for the emulator;
* :mod:`specportal.engines.document` — validate, normalise, hash and diff configuration documents;
* :mod:`specportal.engines.launch` — the exact argv and environment for a document;
* :mod:`specportal.engines.importer` — an existing command line → a document;
* :mod:`specportal.engines.lint` — findings ``{rule, severity, message, source}``.
* :mod:`specportal.engines.versions` — whether an engine's version is the pinned one (start
  checks and the agent's self-report use the same rule).
"""
