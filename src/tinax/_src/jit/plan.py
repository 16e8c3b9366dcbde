"""An object's options, checked once and in order, as one frozen record: its `Plan`.

As JAX's ``PjitInfo``: `parse` runs every check of `options.OPTIONS` in the declared
order (the first error is the one a user sees), and returns what building the object
needs: the function and its signature, the budget and its policy, the mesh, which
arguments are static, the options `jax.jit` is given, what `jax.vmap` is given, and
the fields the object shows, normalized. Nothing here builds or traces.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from jax.sharding import Mesh

from tinax._src.buckets import declared
from tinax._src.core import validation
from tinax._src.jit import conventions, jax_options, options
from tinax._src.models import nonarrays
from tinax._src.models.nnx import checks as nnx_checks


class Vmap(NamedTuple):
    """What `jax.vmap` is given (a `BatchedJit`'s): its axes, its size and its other
    options, checked (``in_axes``/``out_axes`` by `jax.vmap` itself, at the build)."""

    in_axes: Any
    out_axes: Any
    axis_size: int | None
    options: dict[str, Any]


class Plan(NamedTuple):
    """What an object is built from: every option checked and normalized.

    Attributes:
        api: The class's name, which starts every message.
        function: The wrapped callable, checked.
        signature: Its signature, read when first needed.
        max_traces: The budget.
        mesh: The mesh entered around every call, or ``None``.
        on_exceed: The overrun policy, or ``None`` for the process default.
        statics: Which arguments are static, as `jax.jit` decides it on each call
            (``nonarrays``: every leaf that is not an array).
        jit_kwargs: The options `jax.jit` is given (only those the user gave).
        convention: How a call reaches `jax.jit` (`conventions`).
        propagate_updates: ``propagate_updates``, checked.
        watch: How the counted function watches the whole call for lost nnx updates
            (`models/nnx/tracing.watched`'s mode: ``propagate_updates``; ``False`` for a
            `BatchedJit`, which watches each example itself).
        donating: Whether any argument is donated.
        vmap: What `jax.vmap` is given, or ``None`` (a `BoundedJit`).
        buckets: The sizes declared axes may take (``buckets``, checked), or ``None``.
        shown: The normalized values of the fields the object shows.
    """

    api: str
    function: Callable[..., Any]
    signature: validation.LazySignature
    max_traces: int
    mesh: Mesh | None
    on_exceed: str | None
    statics: jax_options.Statics
    jit_kwargs: dict[str, Any]
    convention: conventions.Convention
    propagate_updates: bool | None
    watch: bool | None
    donating: bool
    vmap: Vmap | None
    buckets: declared.Declared | None
    shown: dict[str, Any]


# What an object whose jax.jit and model options are all at their defaults passes on
# (shared by every such object): jax.jit with no option, which raises nothing of its own.
_NO_KWARGS: dict[str, Any] = {}


def parse(api: options.Api, values: Mapping[str, Any]) -> Plan:
    """Checks the options of an object of class ``api`` (its fields, ``values``) in
    the declared order, and returns its `Plan`."""
    function = validation.check_function(api, values["function"])
    batched = api == "BatchedJit"
    axis_size = validation.check_axis_size(api, values["axis_size"]) if batched else None
    max_traces = validation.check_max_traces(api, values["max_traces"])
    signature = validation.LazySignature(function)
    mesh = validation.check_mesh(api, values["mesh"])
    on_exceed = validation.check_on_exceed(api, values["on_exceed"])
    buckets = None
    if values["buckets"] is not None:  # read the signature only for them
        buckets = declared.check(api, values["buckets"], signature.get(), max_traces)
    shown: dict[str, Any] = {
        "max_traces": max_traces,
        "on_exceed": on_exceed,
        "buckets": None if buckets is None else buckets.shown,
    }
    vmap = None
    if batched:
        vmap_options = validation.check_vmap_options(
            api, mesh, values["axis_name"], values["spmd_axis_name"], values["sum_match"]
        )
        vmap = Vmap(values["in_axes"], values["out_axes"], axis_size, vmap_options)
        shown["axis_size"] = axis_size
        shown["sum_match"] = bool(values["sum_match"])
    nnx_checks.check_not_bound(api, function)
    if options.all_defaults(values):  # most objects: nothing to check, nothing passed on
        shown["static_argnames"] = ()
        shown["donate_argnames"] = ()
        return Plan(
            api,
            function,
            signature,
            max_traces,
            mesh,
            on_exceed,
            jax_options.NO_STATICS,
            _NO_KWARGS,
            conventions.PLAIN,
            None,
            False if batched else None,
            False,
            vmap,
            buckets,
            shown,
        )
    propagate = nnx_checks.check_propagate_updates(api, values["propagate_updates"])
    parsed = jax_options.parse(api, signature, values, mesh, options.as_checked)
    static_nonarrays = nonarrays.check(
        api, values["static_nonarrays"], parsed, values["in_shardings"]
    )
    nnx_checks.check_with_nonarrays(api, propagate, static_nonarrays)
    declared.check_not_static(api, buckets, parsed.statics.argnames)
    shown.update(
        static_argnames=parsed.static_argnames,
        donate_argnames=parsed.donate_argnames,
        static_argnums=parsed.static_argnums,
        donate_argnums=parsed.donate_argnums,
        keep_unused=bool(values["keep_unused"]),
        inline=parsed.inline,
        static_nonarrays=static_nonarrays,
        propagate_updates=propagate,
    )
    statics = parsed.statics
    # The one choice of a calling convention: everything after composes it.
    convention: conventions.Convention = conventions.PLAIN
    if static_nonarrays:  # the call reaches jax.jit as (array leaves, static key)
        statics = statics._replace(nonarrays=True)
        donated = parsed.donated  # the donated arguments' leaves apart
        convention = conventions.NonArrays(donated if donated != jax_options.NO_STATICS else None)
    elif propagate and not batched:  # a BoundedJit writes nnx updates back itself
        convention = conventions.WRITE_BACK
    donating = bool(parsed.donate_argnums or parsed.donate_argnames)
    return Plan(
        api,
        function,
        signature,
        max_traces,
        mesh,
        on_exceed,
        statics,
        convention.jit_kwargs(parsed.jit_kwargs),
        convention,
        propagate,
        False if batched else propagate,
        donating and not batched,
        vmap,
        buckets,
        shown,
    )
