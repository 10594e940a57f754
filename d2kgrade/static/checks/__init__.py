"""One module per family of static checks; each registers its checks with :func:`d2kgrade.static.registry.check`."""
