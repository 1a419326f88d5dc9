"""A real engine for tests and demos without a GPU: llama-server built from a pinned sdist.

``specportal.realengine.build`` builds (or reuses) the ``llama-server`` binary from the
``llama-cpp-python`` sdist on PyPI, which vendors llama.cpp; ``specportal.realengine.gguf_writer``
writes random-weight GGUF models (a byte-level BPE tokenizer, a ChatML template, drafts with
controlled agreement, and a cheap draft embedded in an expensive target). Django-free.
"""
