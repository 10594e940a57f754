"""The untrusted side: sandboxed evaluation of submissions and agent episodes.

It may import ``d2kgrade.schema``, ``d2kgrade.io`` and ``d2kgrade.errors`` only; the grader never imports it.
"""
