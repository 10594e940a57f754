"""Executors run a session's episodes: :mod:`~runner.executors.local` (threads, one evaluation lane per GPU) and
:mod:`~runner.executors.ray` (Ray tasks, the same records written on the driver's node)."""
