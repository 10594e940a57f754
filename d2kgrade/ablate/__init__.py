"""Ablation by codemod: which design properties carry a kernel's speed.

- :mod:`d2kgrade.ablate.results`: the record format (``ablations.jsonl``) and its loader, no heavy imports.
- :mod:`d2kgrade.ablate.registry`: the named transforms that rubrics reference (``ablation:`` beside ``static:``);
  the names are known without importing libcst, the transforms themselves live in
  :mod:`d2kgrade.ablate.transforms`, one module per family.
- :mod:`d2kgrade.ablate.driver`: grade, transform, check correctness, time interleaved rounds, write records.
- :mod:`d2kgrade.ablate.stats`: ratio of medians with a bootstrap interval over rounds, and the noise bar.
- :mod:`d2kgrade.ablate.attribution`: per task and arm, what carried the speed and what the missing properties cost.
- :mod:`d2kgrade.ablate.coverage`: which rubric properties have a transform, and why the others have none.

Importing this package imports nothing heavy; nothing here imports torch, triton or the runner at module level.
"""
