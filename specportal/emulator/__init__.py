"""An emulated engine server for machines without GPUs (DESIGN §6): ``specportal emulate``.

It speaks vLLM's, SGLang's and llama.cpp's wire formats over real HTTP on loopback, accepts their
launch flags through the engine flag tables, and times its output with a cost model of continuous
batching and speculative decoding (``profiles``, ``engine``). Text, lengths and acceptance are pure
functions of (seed, prompt, position, request seed). A test double and a demo, never a source of
performance claims. The README in this directory documents every constant and the arithmetic of
the seeds' phenomena.

Django-free, and light to import: the command must accept connections within half a second.
"""
