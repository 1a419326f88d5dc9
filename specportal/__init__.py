"""SpecPortal: decide, per workload and load level, whether speculative decoding earns its keep.

Importing this package must stay cheap and Django-free: GPU hosts install only the core
(``pip install specportal[agent]``), and the command line starts without touching Django.
"""

__version__ = "0.1.0"
