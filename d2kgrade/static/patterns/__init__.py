"""Named, tested queries that static checks are built on (the pattern layer).

Each module answers one kind of question about a file's :class:`~d2kgrade.static.facts.Facts` through its
:class:`~d2kgrade.static.dataflow.Flow`; checks combine them and decide. ``tests/static/test_patterns.py`` tests
each query on small kernels.

- :mod:`~d2kgrade.static.patterns.roles`: pointer roles (which kernel parameter receives an input of
  ``kernel(...)``, an output it returns, or a workspace) and the dtype a host buffer is allocated with.
- :mod:`~d2kgrade.static.patterns.access`: address expressions of loads and stores, the loads a value comes
  from.
- :mod:`~d2kgrade.static.patterns.reductions`: reductions and online normalisers (a running max that rescales a
  running sum).
- :mod:`~d2kgrade.static.patterns.atomics`: atomic operations, including spin locks built from compare-and-swap.
- :mod:`~d2kgrade.static.patterns.scans`: prefix scans and the names of scan/sort calls.
- :mod:`~d2kgrade.static.patterns.host`: values the host computes (alternatives of an if-chain, launch
  configurations, the SM count).
"""
