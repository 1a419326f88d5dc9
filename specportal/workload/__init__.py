"""Workloads shared by the load generator and the emulator (DESIGN §2, owned by the loadgen work).

* ``tokenizer``: the toy tokenizer that makes token counts exact against the emulator;
* ``categories``: the task categories and the prompt classifier;
* ``prompts``: the bundled prompt sets.
"""
