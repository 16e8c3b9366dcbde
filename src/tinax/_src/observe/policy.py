"""The overrun policy: what a trace over budget does (raise, warn or log), and where
that is decided (the object, `exceed_policy`, ``TINAX_ON_EXCEED``, ``"raise"``)."""

from __future__ import annotations

import contextvars
import os
from contextlib import AbstractContextManager
from typing import cast

from tinax._src.core.validation import ON_EXCEED, OnExceed, check_on_exceed

Policy = OnExceed


ENVIRONMENT_VARIABLE = "TINAX_ON_EXCEED"


def policy_from_environment(value: str | None) -> Policy | None:
    """The policy named by the environment variable's value (``None`` if unset or empty).

    Raises:
        ValueError: The value is not one of ``raise``, ``warn``, ``log`` (case and
            surrounding spaces ignored): a typo must stop the job at start, not
            at hour 40.
    """
    if value is None or not value.strip():
        return None
    policy = value.strip().lower()
    if policy not in ON_EXCEED:
        raise ValueError(
            f"tinax: the environment variable {ENVIRONMENT_VARIABLE} must be one of "
            f"'raise', 'warn', 'log' (or empty); got {value!r}."
        )
    return policy


_ENVIRONMENT: Policy | None = policy_from_environment(os.environ.get(ENVIRONMENT_VARIABLE))
_CONTEXT: contextvars.ContextVar[Policy | None] = contextvars.ContextVar(
    "tinax_on_exceed", default=None
)


def resolve(own: str | None) -> Policy:
    """The policy for an overrun: the object's own, the innermost context, the
    environment, then ``"raise"``."""
    return cast("Policy", own or _CONTEXT.get() or _ENVIRONMENT or "raise")


class _PolicyScope:
    """The context manager `exceed_policy` returns; re-entrant, one token per entry."""

    __slots__ = ("_policy", "_tokens")

    def __init__(self, policy: Policy) -> None:
        self._policy: Policy = policy
        self._tokens: list[contextvars.Token[Policy | None]] = []

    def __enter__(self) -> None:
        self._tokens.append(_CONTEXT.set(self._policy))

    def __exit__(self, *exc_info: object) -> None:
        _CONTEXT.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"exceed_policy({self._policy!r})"


def exceed_policy(policy: Policy) -> AbstractContextManager[None]:
    """Sets what a trace over its budget does, for objects without their own ``on_exceed``.

    A three-day training job wants an overrun reported, not a crash at hour 40.
    Inside ``with exceed_policy("warn"):`` every `BoundedJit`/`BatchedJit`
    whose ``on_exceed`` is ``None`` warns instead of raising. The scope is the
    current thread (and asyncio task), as for JAX's own configuration context
    managers; nested scopes stack, the innermost wins. An object's own
    ``on_exceed`` wins over any scope; outside every scope, the environment
    variable ``TINAX_ON_EXCEED`` (read when tinax is imported) applies, then
    ``"raise"``. Under `chex.disable_asserts` a trace over budget is counted,
    never raised or warned, as before (it is still logged).

    Args:
        policy: ``"raise"``: refuse the trace with `TraceBudgetError` (the
            default). ``"warn"``: emit a `TraceBudgetWarning` carrying the same
            diagnosis, then let the trace run and count it. ``"log"``: log the
            diagnosis at ``WARNING`` on the ``tinax`` logger, then let the trace
            run and count it.

    Returns:
        A context manager (re-entrant) that sets the policy while it is entered.

    Raises:
        TypeError: If `policy` is not a str.
        ValueError: If `policy` is not ``"raise"``, ``"warn"`` or ``"log"``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from tinax.jit import bounded_jit, exceed_policy
        >>> step = bounded_jit(lambda x: x + 1, max_traces=0)
        >>> with exceed_policy("log"):
        ...     step(jnp.ones(3)).tolist()
        [2.0, 2.0, 2.0]
        >>> step.traces_used
        1
    """
    checked = check_on_exceed("exceed_policy", policy, parameter="policy")
    if checked is None:
        raise TypeError(
            "exceed_policy: policy must be one of 'raise', 'warn', 'log'; got None (NoneType)."
        )
    return _PolicyScope(cast("Policy", checked))
