"""Observability for long runs, one room per idea. Everything here runs at wrap time or
at trace time, never on a cached call; nothing is formatted unless the ``tinax`` logger
is enabled for the record's level.

- `log`: the ``tinax`` logger (silent by default).
- `policy`: what a trace over budget does, and where that is decided.
- `sites`: the call site of a trace and the construction site of an object.
- `compile_events`: JAX's compile events (`jax.monitoring`): a load from the persistent
  cache told from a compile, and XLA compile time, given to its trace.
- `registry` and `registry_table`: the live objects, `budgets()` and its table.
- `rebuilt`: the warning for wrappers rebuilt per step.
- `trace_reports`: what a refused, overrun or counted trace says.
- `watchers`: what a test session (``--tinax-budgets``) is told.
"""
