"""Ablation transforms, one module per family; importing a module registers its transforms
(:func:`d2kgrade.ablate.registry.load_all` imports them all)."""
