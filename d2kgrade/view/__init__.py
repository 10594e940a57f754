"""``d2kgrade view``: a static site of runs, episode by episode (transcript, kernels, evaluation, grades).

Start at :func:`d2kgrade.view.site.build_site`. The data layer (:mod:`d2kgrade.view.data`) is shared with the
report, which links its rows into the site. Nothing here is imported by the CLI until the command runs.
"""
