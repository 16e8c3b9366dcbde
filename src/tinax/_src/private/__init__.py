"""Every private JAX and chex API tinax relies on, in one folder, one room per topic.

Each has no public equivalent (noted per function). Keeping them here makes a
JAX or chex upgrade a one-folder review; the tests exercise each of them, and CI
runs them on jax 0.9.2, 0.10.2 and the newest release (0.12.0.1 today), with
chex 0.1.84 and 0.1.92. Where each one lives (its room, then JAX's module), and
what happens on a JAX where it does not:

- `meshes`: mesh contexts (`enter_mesh`, `mesh_contexts`, `restore_mesh`,
  `ambient_concrete_mesh`): ``jax._src.config`` to 0.11.1, ``jax._src.mesh`` from
  0.11.2, found by attribute; neither: tinax's import fails with one line.
- `jit_frames`: ``cache_miss``'s locals (`jit_call`): 0.9.2 to 0.12.0.1; renamed: no
  compile is counted for the call, its traces still are.
- `jit_frames`: ``_pjit_call_impl_python``'s local ``jaxpr`` (`compiled_jaxpr`),
  ``PjitInfo.fun_sourceinfo`` on a `jax.jit` object and ``DebugInfo.func_src_info`` of
  a jaxpr, copied by JAX's transformations (`jit_source`, `jaxpr_source`): run on
  0.10.2, read in 0.9.2's and 0.11.1's source; renamed: a compile under an eager
  transform is counted only inside the object's own call, as a compile of its trace.
- `compile_events`: JAX's stages (``Traced``, ``Lowered``) having a ``__dict__``
  (`shadow_method`): 0.10.2 and 0.12.0.1; without one: a stage's compile is not counted.
- `jit_frames`: ``_infer_input_type`` formatting the jitted function into its message
  for a leaf it cannot trace, and ``_infer_params``'s locals (`rejected_leaf_call`):
  0.9.2 to 0.12.0.1; renamed: the call raises JAX's own message.
- `jit_frames`: ``_infer_params``'s locals ``args`` and ``kwargs`` (`traced_arguments`):
  0.9.2 to 0.12.1; renamed: warm start compiles for replicated inputs on an Auto mesh.
- `tracing`: ``core.trace_ctx`` and ``DynamicJaxprTrace`` (`tracing_to_jaxpr`,
  `staged_out`): 0.9.2 to 0.12.0.1; no fallback (the import fails).
- `flags`: ``config.trace_context_names`` (`trace_config`): missing: no config row.
- `tracebacks`: ``traceback_util`` (`hide_from_tracebacks`, `filter_traceback`):
  missing filtering mode: tracebacks are left whole.
  ``source_info_util.register_exclusion`` (`hide_from_tracebacks`): missing: JAX's
  source locations may name tinax's lines.
- `placement`: ``_trace_for_jit``'s and ``_infer_params``'s locals,
  ``_resolve_in_shardings``, ``_get_and_check_device_assignment`` (`misplaced`):
  0.10.2 and 0.12.0.1; renamed: a call placed against ``in_shardings`` fails as in
  JAX, after a counted trace.
- `portable`: ``ShapedArray``'s constructor and ``abstract_token``
  (`portable_dumps`): no readable signature: plain pickling (equal by value on 0.9.2
  and 0.10.2).
- `jax_types`: ``literals`` (`literal_array_types`): missing: none.
- `compile_events`: JAX's compile events (`COMPILE_EVENT`, `CACHE_HIT_EVENT`): run on
  0.10.2 and 0.12.0.1 (`cache_loads`, `no_new_compiles`); where a JAX stops recording
  the start of a compile, a load is told from a compile by the next request to the
  persistent cache, and `no_new_compiles` reports a budgeted object's compile at the
  scope's end instead of refusing it.
- `flags`: ``config.jax_jit_cpp_cache_obj`` (`jit_cache_object`,
  `no_jit_cache_object`): the one config option `jax.jit` reads when it builds its
  object (``pjit._cpp_pjit``; read on 0.10.2 and 0.12.0.1); missing: ``None``,
  nothing to capture.
- ``sharding_impls.UNSPECIFIED`` (`jax_types`), ``distributed.global_state``
  (`flags`), ``core.valid_jaxtype`` (`tracing`), chex's ``DISABLE_ASSERTIONS``
  (`flags`): 0.9.2 to 0.12.0.1, no fallback.

- `executables`: ``compiler.compile_or_get_cached`` (`intercept`: warm start records
  each compile's module and answers a call from an executable compiled ahead),
  ``xla_bridge.backends_are_initialized`` and ``_backends`` (`backend_started`: the
  compiles ahead wait for the program to start the backend), ``make_ir_context`` and
  the ``strip-debuginfo`` pass JAX's cache key runs (`parse`, `module_digest`): 0.9.2,
  0.10.2 and 0.12.1; renamed: warm start records and compiles nothing ahead.

- `jit_traces`: ``pjit._trace_for_jit``, replaced while an audit is open (`hook_traces`:
  every trace, with its ``PjitInfo`` and arguments), ``core.trace_state_clean`` (a
  nested trace), the ``jaxpr_trace`` and ``jaxpr_to_mlir_module`` events (`TRACE_EVENT`,
  `LOWER_EVENT`), and equinox's ``fun_wrapped`` and ``hashable_combine``
  (`equinox_call`: the user's call inside ``filter_jit``, read on equinox 0.13.8): read
  on jax 0.9.2, 0.10.2 and 0.12.1; where a JAX renames ``_trace_for_jit``, opening an
  audit raises `AuditUnavailable` naming the release; where equinox changes, its traces
  are recorded as `jax.jit` sees them.

Rules that changed between releases are read from the version (`JAX_VERSION`, in
`versions`): `STATIC_HASH_DECIDES`.

Every name is re-exported here. Modules outside this folder import the folder and
call ``private.X`` (never ``from tinax._src.private.room import X``), so a test that
patches ``private.X`` patches what they call.
"""

from tinax._src.private.compile_events import CACHE_HIT_EVENT as CACHE_HIT_EVENT
from tinax._src.private.compile_events import CACHE_REQUEST_EVENT as CACHE_REQUEST_EVENT
from tinax._src.private.compile_events import COMPILE_EVENT as COMPILE_EVENT
from tinax._src.private.compile_events import shadow_method as shadow_method
from tinax._src.private.executables import Parsed as Parsed
from tinax._src.private.executables import Request as Request
from tinax._src.private.executables import backend_started as backend_started
from tinax._src.private.executables import backends_started as backends_started
from tinax._src.private.executables import compile_parsed as compile_parsed
from tinax._src.private.executables import device_ids as device_ids
from tinax._src.private.executables import digest as digest
from tinax._src.private.executables import intercept as intercept
from tinax._src.private.executables import jax_compile as jax_compile
from tinax._src.private.executables import module_bytes as module_bytes
from tinax._src.private.executables import module_digest as module_digest
from tinax._src.private.executables import module_name as module_name
from tinax._src.private.executables import options_bytes as options_bytes
from tinax._src.private.executables import parse as parse
from tinax._src.private.flags import chex_asserts_enabled as chex_asserts_enabled
from tinax._src.private.flags import distributed_state as distributed_state
from tinax._src.private.flags import jit_cache_object as jit_cache_object
from tinax._src.private.flags import jit_disabled as jit_disabled
from tinax._src.private.flags import no_jit_cache_object as no_jit_cache_object
from tinax._src.private.flags import trace_config as trace_config
from tinax._src.private.jax_types import literal_array_types as literal_array_types
from tinax._src.private.jax_types import unspecified as unspecified
from tinax._src.private.jax_types import unspecified_type as unspecified_type
from tinax._src.private.jit_frames import JitCall as JitCall
from tinax._src.private.jit_frames import compiled_jaxpr as compiled_jaxpr
from tinax._src.private.jit_frames import jaxpr_source as jaxpr_source
from tinax._src.private.jit_frames import jit_call as jit_call
from tinax._src.private.jit_frames import jit_source as jit_source
from tinax._src.private.jit_frames import rejected_leaf_call as rejected_leaf_call
from tinax._src.private.jit_frames import traced_arguments as traced_arguments
from tinax._src.private.jit_traces import LOWER_EVENT as LOWER_EVENT
from tinax._src.private.jit_traces import TRACE_EVENT as TRACE_EVENT
from tinax._src.private.jit_traces import AuditUnavailable as AuditUnavailable
from tinax._src.private.jit_traces import JitTrace as JitTrace
from tinax._src.private.jit_traces import equinox_call as equinox_call
from tinax._src.private.jit_traces import hook_traces as hook_traces
from tinax._src.private.jit_traces import jax_internal as jax_internal
from tinax._src.private.jit_traces import trace_entry as trace_entry
from tinax._src.private.jit_traces import unwrapped as unwrapped
from tinax._src.private.meshes import ambient_concrete_mesh as ambient_concrete_mesh
from tinax._src.private.meshes import enter_mesh as enter_mesh
from tinax._src.private.meshes import mesh_contexts as mesh_contexts
from tinax._src.private.meshes import restore_mesh as restore_mesh
from tinax._src.private.placement import lowering as lowering
from tinax._src.private.placement import misplaced as misplaced
from tinax._src.private.portable import PortablePickler as PortablePickler
from tinax._src.private.portable import portable_dumps as portable_dumps
from tinax._src.private.tracebacks import filter_traceback as filter_traceback
from tinax._src.private.tracebacks import hide_from_tracebacks as hide_from_tracebacks
from tinax._src.private.tracing import staged_out as staged_out
from tinax._src.private.tracing import tracing_to_jaxpr as tracing_to_jaxpr
from tinax._src.private.tracing import valid_output as valid_output
from tinax._src.private.versions import JAX_VERSION as JAX_VERSION
from tinax._src.private.versions import STATIC_HASH_DECIDES as STATIC_HASH_DECIDES
