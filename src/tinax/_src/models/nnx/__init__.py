"""``propagate_updates``: what becomes of a `flax.nnx` ``Variable`` assigned inside a trace.

An nnx Module, Optimizer or Rngs passed to `jax.jit` is a pytree: JAX flattens
it at the call and builds new objects from the leaves inside the trace, so an
assignment there (``optimizer.update(model, grads)``, BatchNorm's statistics,
Dropout's RNG counter) changes those new objects and is dropped when the trace
ends, silently. The three modes:

- ``None`` (the default): the trace is watched. A ``Variable`` reachable from
  an argument whose value was assigned and whose new value is not among the
  outputs makes the trace raise `ValueError`, naming every such path. Nothing
  runs on a cached call: the object stays the `jax.jit` object itself.
- ``True``: the assignments are written back into the caller's objects after
  every call, as ``nnx.jit`` does. The caller's objects (arguments, or inside
  tuple, list and dict arguments) are flattened once (``nnx.jit_partial``'s
  idea) and kept while their structure is unchanged, a check by identity of
  each node's attributes; a call passes, in each object's place, its
  Variables' raw values as a flat list, writes back only the values the trace
  assigned, and gives back each of the caller's objects the function returns
  as itself. A change of structure inside the trace (a Variable replaced,
  submodules swapped) raises, naming each attribute; a cycle among the objects
  is refused before any flatten (JAX's would recurse to Python's limit).
- ``False``: `jax.jit`'s behaviour (dropped).

The rooms, each importing only the ones above it in this list:

- `classes`: flax's classes, found without importing flax (read from
  ``sys.modules`` when a trace or call needs them; no nnx object can exist
  before flax is imported), and whether a value holds an nnx object.
- `messages`: the errors (updates lost, a change of structure, a cycle).
- `checks`: the option's checks at wrap time.
- `trees`: walking a tree one level at a time, and finding cycles.
- `watch`: watching a trace for lost updates (what was assigned, what changed
  structure).
- `layout`: how the caller's objects travel in a call (`Layout`, `Slot`).
- `tracing`: the trace-time wrappers (`watched`, `rebinding`) and what a trace
  returns to the call (`Updates`, `Returned`, `NewRef`).
- `propagate`: the propagating call (`Propagating`, `Staged`).
"""
