"""Load a task's ``reference.py`` or a submission file as a fresh module, under a name of its own."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from d2kgrade.errors import UserError


def load_module(path: Path, prefix: str = "d2k_loaded") -> ModuleType:
    """Import ``path`` as a new module (never cached across paths or contents).

    Raises:
        UserError: if the file does not exist. Errors raised by the module's own code propagate: callers that
        load untrusted code turn them into statuses.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    digest = hashlib.sha1(str(path).encode() + path.read_bytes()).hexdigest()[:12]
    name = f"{prefix}_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton's JIT resolves globals through sys.modules
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
