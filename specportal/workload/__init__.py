"""Workloads shared by the load generator and the emulator (DESIGN §2, owned by the loadgen work).

* ``tokenizer``: the toy tokenizer that makes token counts exact against the emulator;
* ``categories``: the task categories and the rule-based classifier;
* ``prompts``: the bundled prompt sets;
* ``classifier``: ``classify`` (a bundled prompt's category, else the rules');
* ``synthetic``: distinct synthetic prompts (vLLM's ``random`` dataset, ``--random-prefix-len``);
* ``datasets``: local files (JSONL, ShareGPT, MT-Bench) and the bundled sets as workloads.
"""
