"""Dtype names used in task files, and their sizes. No torch here: the grading side must not import it."""

from __future__ import annotations

# Catalog names -> bytes per element.
DTYPE_BYTES: dict[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

FLOAT_DTYPES = frozenset({"fp64", "fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"})

# Tolerance tables may name a family ("fp8") instead of one exact dtype.
TOLERANCE_ALIASES: dict[str, str] = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}

# Catalog name -> attribute of the torch module. Used only on the runner side.
TORCH_NAMES: dict[str, str] = {
    "fp64": "float64",
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}


def tolerance_key(dtype: str, table: dict[str, object]) -> str | None:
    """The key of ``table`` that governs outputs stored as ``dtype``, or None if there is none."""
    if dtype in table:
        return dtype
    alias = TOLERANCE_ALIASES.get(dtype)
    return alias if alias in table else None
