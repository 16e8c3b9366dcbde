"""Building an object once from its plan: the counted function, the `jax.jit` object
and the call, at the object's first use (or at wrap time, where `jax.jit` checks an
option itself), with the calling convention the plan chose composed in."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, cast, overload

import jax

from tinax._src import private
from tinax._src.budget import compiles, counting
from tinax._src.jit import jax_options, meshes, options
from tinax._src.jit.call_errors import leaf_error
from tinax._src.jit.metadata import present
from tinax._src.jit.plan import Plan
from tinax._src.jit.probe import Probe
from tinax._src.models.nnx import tracing as nnx_tracing
from tinax._src.objects.handle import Handle
from tinax._src.objects.ledger import Ledger
from tinax._src.observe import registry


class WithOptions:
    """``jax.jit`` with an object's options (none, or those its plan passes on),
    as `jax_options.jit` calls it: the ``jax.jit`` in effect when the object was built (a
    patched one too), and what that ``jax.jit`` reads when it builds its object, as it
    was then. ``later``: nothing it could raise and nothing it reads is set, so `build`
    leaves it to the object's first use."""

    __slots__ = ("_api", "_jit", "_kwargs", "later")

    def __init__(self, api: str, kwargs: dict[str, Any]) -> None:
        self._api = api
        self._kwargs = kwargs
        self._jit: Any = cast("Any", jax).jit
        # A jax.jit cache object set around the wrap (JAX's jax_jit_cpp_cache_obj, the
        # one config jax.jit reads when it builds): built now, in it, as jax.jit would be.
        later = options.CHECKED_BY_JAX.isdisjoint(kwargs)
        self.later = later and private.jit_cache_object() is None

    def __call__(self, counted: Callable[..., Any]) -> Any:
        if self.later and private.jit_cache_object() is not None:
            with private.no_jit_cache_object():  # set around the first use, not the wrap
                return jax_options.jit(self._api, counted, self._kwargs, self._jit)
        return jax_options.jit(self._api, counted, self._kwargs, self._jit)

    @property
    def options(self) -> dict[str, Any]:
        """The options passed to `jax.jit`."""
        return self._kwargs


def build(
    owner: Any,
    plan: Plan,
    traced: Callable[..., Any],
    around: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Builds the counted, compiled callable of ``owner`` once, from its ``plan``, and
    sets the fields it shows (normalized) and its metadata.

    The counted function and the `jax.jit` object are built at the object's first
    use (`AtFirstUse`), where the first trace hides their ~30 us, with the
    ``jax.jit`` in effect now; given options that `jax.jit` checks itself
    (`options.CHECKED_BY_JAX`), they are built now, so that its errors are wrap-time
    errors, and so they are where a `jax.jit` cache object is set now (what `jax.jit`
    reads when it builds: `private.jit_cache_object`); one set only around the first
    use is not used, as by a `jax.jit` built now.

    ``traced`` is what JAX traces (the function, or its `jax.vmap`); `jax.jit`
    compiles the counted version of it with the plan's options. ``around`` builds
    ``traced`` from another function (the `jax.vmap` of a `BatchedJit`; ``None``:
    the function itself): a stand-in goes through it to find the error a call would
    raise (`rejections`).
    """
    ledger = Ledger()
    jit = WithOptions(plan.api, plan.jit_kwargs)  # the jax.jit in effect now
    probe = Probe(plan.function, plan.signature, around, jit, plan.convention)
    handle = Handle(
        plan.api,
        plan.function,
        plan.max_traces,
        plan.signature,
        plan.statics,
        plan.mesh,
        plan.on_exceed,
        ledger,
        weakref.ref(owner),
        plan.convention.user_arguments,
        plan.buckets,
    )
    own = owner.__dict__  # frozen: written as attrs's __init__ writes the fields
    own.update(
        plan.shown,
        _plan=plan,
        _handle=handle,
        _ledger=ledger,
        _signature=plan.signature,
        _static=plan.statics,
        _probe=probe,
    )
    names = counting.jax_names(plan.function)  # read once: the counted function's and ours
    present(owner, plan.function, names)
    if jit.later:  # nothing jax.jit could raise: built at the first use
        own["_pending"] = traced
    else:  # jax.jit's own errors for the options are raised at wrap time
        own["_jitted"], own["_call"] = _compiled_call(owner, traced)
    registry.register(handle)  # weakly: tinax.jit.budgets() lists live objects


# One lock for every object's first use: a build takes ~30 us, once per object.
_compiling = threading.RLock()


def _compile(owner: Any) -> None:
    """Builds the `jax.jit` object and the call of an object at its first use, unless
    another thread has (`build` left the function to compile in ``_pending``)."""
    own = owner.__dict__
    with _compiling:
        pending = own.get("_pending")
        if pending is None:
            return
        own["_jitted"], own["_call"] = _compiled_call(owner, pending)
        del own["_pending"]


def _compiled_call(owner: Any, traced: Callable[..., Any]) -> tuple[Any, Callable[..., Any]]:
    """The counted function of ``owner`` (whose plan, handle and probe `build` has set),
    its `jax.jit` object, and the object's call."""
    own = owner.__dict__
    plan: Plan = own["_plan"]
    handle: Handle = own["_handle"]
    function, signature, statics = plan.function, plan.signature, plan.statics
    jit: WithOptions = own["_probe"].jit
    names: tuple[str, str] = (own["__name__"], own["__qualname__"])
    api, convention = plan.api, plan.convention
    watched = nnx_tracing.watched(traced, plan.watch, function, signature, write_all=plan.donating)
    counted = counting.counted(
        convention.traced(watched, jit.options), handle, names=names, rejects=own["_probe"].traced
    )
    refused = functools.partial(leaf_error, api, signature, statics, convention)
    compiled = convention.compiled(counted, names, refused)
    jitted = jit(compiled)  # what jax.jit calls: its compiles are this object's
    compiles.register(compiled, handle, jitted)  # and those of jaxprs made from its traces
    jitted = convention.jitted(jitted, function, signature)
    call = convention.caller(meshes.bind_mesh(jitted, plan.mesh, api), refused)
    return jitted, call


class AtFirstUse:
    """A class attribute standing for a part of the compiled callable (``_jitted``,
    ``_call``) until `_compile` has put it in the object's ``__dict__``, where Python
    finds it first: this descriptor has no ``__set__``. The first read builds; later
    reads, a call's among them, never come here."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> AtFirstUse: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Any: ...
    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        _compile(instance)
        return instance.__dict__[self._name]
