"""Redact secret values from every text that comes back from an evaluation.

The kernel host's environment holds no secret (:func:`runner.sandbox.scrub_env`), and as root it cannot read
another process's. Not as root, or through a channel nobody foresaw, a submission might still learn a secret of
the process that started d2kgrade (or of its shell, whose exported variables that process inherits) and print it,
raise it or return it in an error. So the caller scans everything the evaluation produced (the log, messages,
flags, tracebacks: the whole result) for the values of its own secret-looking variables, as they are and in
hex and base64, and replaces them before anything reaches a tool result, a transcript or the store.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping

MIN_SECRET_LEN = 6
"""Shorter values (``1``, ``true``) are not secrets worth a redaction that would garble ordinary text."""
MARK = "[redacted]"


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables (the names :data:`runner.sandbox.SECRET_ENV` drops), longest first,
    each with its hex and base64 forms."""
    from runner.sandbox import SECRET_ENV

    env = os.environ if environ is None else environ
    values: set[str] = set()
    for name, value in env.items():
        if SECRET_ENV.search(name) and len(value) >= MIN_SECRET_LEN:
            raw = value.encode()
            values |= {value, raw.hex(), base64.b64encode(raw).decode().rstrip("="),
                       base64.urlsafe_b64encode(raw).decode().rstrip("="), value[::-1]}
    return sorted(values, key=len, reverse=True)


def redact(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each value replaced by :data:`MARK`."""
    vals = [v for v in values if v]
    if not vals or not text:
        return text
    pattern = re.compile("|".join(re.escape(v) for v in vals))
    return pattern.sub(MARK, text)


__all__ = ["secret_values", "redact", "MARK"]
