"""Human annotation: blind packs for people (Label Studio projects and a CSV template), and their answers back
into the long ratings table that ``d2kgrade agree`` reads. See :mod:`d2kgrade.annotate.pack`."""
