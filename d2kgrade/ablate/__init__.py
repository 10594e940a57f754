"""Ablation by codemod: which design properties carry a kernel's speed.

- :mod:`d2kgrade.ablate.results`: the record format (``ablations.jsonl``) and its loader, no heavy imports.
- :mod:`d2kgrade.ablate.registry`: the named transforms that rubrics reference (``ablation:`` beside ``static:``);
  the names are known without importing libcst, the transforms themselves live in
  :mod:`d2kgrade.ablate.transforms`, one module per family.
- :mod:`d2kgrade.ablate.driver`: grade, transform, check correctness, time interleaved rounds, write records.

Importing this package imports nothing heavy; nothing here imports torch, triton or the runner at module level.
"""
