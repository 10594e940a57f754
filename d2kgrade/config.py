"""Settings, resolved once, lowest first: defaults, ``[tool.d2kgrade]`` in ./pyproject.toml or ./d2kgrade.toml,
``D2KGRADE_*`` environment variables, then CLI flags. The result is a frozen object passed down.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from d2kgrade.errors import UserError

ENV_PREFIX = "D2KGRADE_"


def default_suite_dir() -> Path:
    """The suite shipped with d2kgrade: the source checkout's root, or the copy inside the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parent
    if (checkout / "tasks").is_dir() and (checkout / "rubrics").is_dir():
        return checkout
    return here / "_suite"


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Fields may be set by config file (same names) or ``D2KGRADE_<NAME>``."""

    suite: Path = default_suite_dir()
    """Root of the suite: holds tasks/, rubrics/ and references/."""


def _from_file(cwd: Path) -> dict[str, Any]:
    for name, section in (("d2kgrade.toml", None), ("pyproject.toml", ("tool", "d2kgrade"))):
        path = cwd / name
        if not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: not valid TOML ({exc})") from None
        if section:
            for key in section:
                data = data.get(key, {}) if isinstance(data, dict) else {}
        if data:
            return {"_source": str(path), **data}
    return {}


def load_settings(cwd: Path | None = None, **overrides: Any) -> Settings:
    """Resolve settings from defaults, config file, environment and ``overrides`` (CLI flags; None = unset)."""
    cwd = cwd or Path.cwd()
    settings = Settings()
    known = {f.name for f in fields(Settings)}
    layers: list[tuple[str, dict[str, Any]]] = []
    file_data = _from_file(cwd)
    if file_data:
        source = file_data.pop("_source")
        layers.append((source, file_data))
    env = {k[len(ENV_PREFIX):].lower(): v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    layers.append(("environment", {k: v for k, v in env.items() if k in known}))
    layers.append(("command line", {k: v for k, v in overrides.items() if v is not None}))
    for source, data in layers:
        for key, value in data.items():
            if key not in known:
                raise UserError(f"{source}: unknown setting {key!r}; known settings: {sorted(known)}")
            if key == "suite":
                value = Path(value).expanduser()
                if source != "command line" and source != "environment" and not value.is_absolute():
                    value = (Path(source).parent / value).resolve()
            settings = replace(settings, **{key: value})
    return settings
