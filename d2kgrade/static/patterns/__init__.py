"""Named, tested queries that static checks are built on (the pattern layer).

Each module answers one kind of question about a file's :class:`~d2kgrade.static.facts.Facts` through its
:class:`~d2kgrade.static.dataflow.Flow`; checks (:mod:`d2kgrade.static.checks`) combine them and decide.
``tests/static/test_patterns.py`` tests the queries on small kernels. Patterns never import checks.

- :mod:`~d2kgrade.static.patterns.names`: call-name sets (atomics, views, MMA calls, divisions), dtype families,
  a structural key of an expression.
- :mod:`~d2kgrade.static.patterns.access`: address expressions of loads and stores, the loads a value comes
  from, the nodes of a value, unit-stride aranges.
- :mod:`~d2kgrade.static.patterns.roles`: pointer roles: which kernel parameter receives an input of
  ``kernel(...)``, an output it returns, or a workspace, the host tensor a launch passes, a buffer's dtype.
- :mod:`~d2kgrade.static.patterns.reductions`: online normalisers (a running max that rescales a running sum).
- :mod:`~d2kgrade.static.patterns.atomics`: atomics and values published through memory.
- :mod:`~d2kgrade.static.patterns.sorts`: sorts and hand-written compare-exchange networks.
- :mod:`~d2kgrade.static.patterns.liveness`: which calls run (dead branches, guards on loaded data), load taints.
- :mod:`~d2kgrade.static.patterns.host`: the alternatives a host value takes, constexpr modes a launcher picks.
- :mod:`~d2kgrade.static.patterns.config`: launch configurations (autotune configs, meta-parameter values).
- :mod:`~d2kgrade.static.patterns.mma`: tensor-core main loops (MMA calls, accumulators, inline asm).
"""
