"""The running JAX's version, and the rules read from it that changed between releases."""

from __future__ import annotations

import jax


def _version_tuple(text: str) -> tuple[int, int, int]:
    """``"0.12.0.1"`` -> ``(0, 12, 0)``; a part that is not a number reads as 0."""
    parts = [int(part) if part.isdigit() else 0 for part in text.split(".")[:3]]
    major, minor, patch = [*parts, 0, 0, 0][:3]
    return major, minor, patch


JAX_VERSION: tuple[int, int, int] = _version_tuple(jax.__version__)
"""The running JAX's ``(major, minor, patch)``, for the rules that changed between
releases (each named where it is used)."""

STATIC_HASH_DECIDES: bool = JAX_VERSION >= (0, 11, 0)
"""Whether `jax.jit` finds a static argument by its hash as well as by type and ``==``.
Measured (`tests/test_jax_agrees.py`): on jax 0.9.2 and 0.10.2 a static value equal by
``==`` with another hash reuses the trace; on 0.11.0 and later (0.12.0.1 run here) it
traces again."""
