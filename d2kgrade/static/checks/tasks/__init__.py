"""Task-specific static checks, one module per task id (``tasks/<id>.py``): the checks only that task's rubric
uses. A task author finds a task's checks by its id; checks that several rubrics use live in the concept modules
of :mod:`d2kgrade.static.checks`, built on the pattern layer :mod:`d2kgrade.static.patterns`."""
