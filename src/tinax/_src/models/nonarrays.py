"""``static_nonarrays=True``: every leaf that is not an array is static, as `eqx.filter_jit`.

A model library's module (an equinox ``Module``) is a pytree whose leaves mix
arrays with functions (``activation``), Python numbers and strings. `jax.jit`
refuses the call; equinox's ``filter_jit`` holds the non-array leaves static,
at a cost of about 100 us per call in Python. This does the same in a few
microseconds:

- per call (`caller`): one `jax.tree_util.tree_flatten` of ``(args, kwargs)``,
  one loop that sorts the leaves into arrays and the rest (a dict lookup per
  leaf type), then the `jax.jit` object is called with the list of array
  leaves and one static key: ``(tree structure, the leaves with None where an
  array is, the type of each non-array leaf)``. JAX hashes the key and compares
  it with ``==``: a new structure, a new non-array value or the same value with
  another type traces again, exactly as JAX keys a static argument. With
  ``donate_argnums``/``donate_argnames`` (`split_donated`), the arguments they
  name are split apart: `jax.jit` gets their array leaves as a list of its own,
  donated (argument 0), then the others' and the key (``static_argnums=2``).
- at trace time only (`joined`): the key and the traced leaves are put back
  into the user's arguments and the function runs. An output with non-array
  leaves is returned to JAX as an `Output` (`returning_parts`): its array leaves
  as children, and the rest in a tree structure (its non-array leaves carried
  in it by `StaticLeaf`) as auxiliary data, which JAX keeps per compiled
  executable. JAX's C++ dispatch takes a cached call only when every leaf of the
  output is an array, and this keeps it there: per call, the Python path pays
  one ``treedef.unflatten`` (`call_static_nonarrays`) to give back the user's
  output, a module with its functions among it, with the values of its trace.

Everything runs in tinax's frames, hidden from tracebacks like JAX's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

import jax

from tinax._src import private
from tinax._src.core.statics import KNOWN, Statics, array_type, is_array

_tree_util: Any = jax.tree_util
flatten: Any = _tree_util.tree_flatten


class StaticLeaf:
    """A non-array leaf of a traced function's output, carried in the tree structure.

    Registered as a pytree node with no children whose auxiliary data is the
    value: JAX stores it with the executable's output structure, and rebuilding
    the output gives back the value itself (never a `StaticLeaf`).
    """

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _flatten_leaf(leaf: StaticLeaf) -> tuple[tuple[()], object]:
    return (), leaf.value


def _unflatten_leaf(value: object, children: object) -> object:
    return value


_tree_util.register_pytree_node(StaticLeaf, _flatten_leaf, _unflatten_leaf)


def marked(out: Any) -> Any:
    """``out`` with each non-array leaf in a `StaticLeaf` (at trace time only)."""
    leaves: list[object]
    leaves, treedef = flatten(out)
    if all(is_array(leaf) for leaf in leaves):
        return out
    return treedef.unflatten([leaf if is_array(leaf) else StaticLeaf(leaf) for leaf in leaves])


def returning_marked(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` whose output has its non-array leaves marked (see `marked`): the
    output of a `jax.jit` given a tree of ``out_shardings`` (a prefix of the user's
    output, which an `Output` would not match). JAX's C++ dispatch does not take
    such a call (a non-array leaf in the rebuilt output): its Python path does."""

    def run(*args: Any, **kwargs: Any) -> Any:
        out = function(*args, **kwargs)
        if not private.tracing_to_jaxpr():  # eager (jax.disable_jit): nothing rebuilds it
            return out
        return marked(out)

    return run


class Output:
    """The output of a traced function that holds non-array leaves, as `jax.jit` returns
    it: the array leaves (``arrays``, its children) and the tree structure of the
    output with each non-array leaf in a `StaticLeaf` (``treedef``, auxiliary data:
    JAX keeps it per compiled executable, so each trace gives back its own values).

    Every leaf JAX sees is an array, so a cached call stays on its C++ dispatch
    path; `whole` gives back the user's output.
    """

    __slots__ = ("arrays", "treedef")

    def __init__(self, treedef: Any, arrays: Any) -> None:  # as JAX unflattens it
        self.treedef = treedef
        self.arrays = arrays

    def whole(self) -> Any:
        """The function's output: its arrays, and its other leaves as they were traced."""
        return self.treedef.unflatten(self.arrays)


def _flatten_output(output: Output) -> tuple[Any, Any]:
    return output.arrays, output.treedef


_tree_util.register_pytree_node(Output, _flatten_output, Output)


def parts(out: Any) -> Any:
    """``out`` as the traced function returns it: itself if every leaf is an array,
    else an `Output` (at trace time only)."""
    leaves: list[object]
    leaves, treedef = flatten(out)
    if all(is_array(leaf) for leaf in leaves):
        return out
    arrays, inner = flatten(
        treedef.unflatten([leaf if is_array(leaf) else StaticLeaf(leaf) for leaf in leaves])
    )
    return Output(inner, arrays)


def returning_parts(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` whose output is split into its arrays and the rest (see `parts`);
    eagerly too (`jax.disable_jit`), where `whole` gives the output back alike."""

    def run(*args: Any, **kwargs: Any) -> Any:
        return parts(function(*args, **kwargs))

    return run


def whole(out: Any) -> Any:
    """The user's output from what the `jax.jit` object returned (`Output` or not)."""
    return out.whole() if type(out) is Output else out


def splits_output(jit_kwargs: Mapping[str, Any]) -> bool:
    """Whether the traced function returns its output split (`returning_parts`): unless
    ``out_shardings`` is a tree, a prefix of the user's output, which JAX matches
    against the output's structure (one sharding, or none, applies to any)."""
    shardings = jit_kwargs.get("out_shardings")
    if shardings is None:
        return True
    sharding: Any = jax.sharding
    return isinstance(shardings, (sharding.Sharding, sharding.PartitionSpec))


Key = tuple[Any, tuple[Any, ...], tuple[type, ...]]


def split(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[list[Any], Key]:
    """``(array leaves, static key)`` of a call; see the module docstring."""
    leaves, treedef = flatten((args, kwargs))
    known = KNOWN
    dynamic: list[Any] = []
    statics: list[Any] = []
    types: list[type] = []
    for leaf in leaves:
        kind: type = type(cast("object", leaf))
        array = known.get(kind)
        if array is None:
            array = array_type(kind)
        if array:
            dynamic.append(leaf)
            statics.append(None)  # None is never a leaf: it marks an array's place
        else:
            statics.append(leaf)
            types.append(kind)
    return dynamic, (treedef, tuple(statics), tuple(types))


def join(dynamic: list[Any], key: Key) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's ``(args, kwargs)`` back from `split`'s parts."""
    treedef, statics, _ = key
    arrays = iter(dynamic)
    leaves = [next(arrays) if leaf is None else leaf for leaf in statics]
    args, kwargs = treedef.unflatten(leaves)
    return args, kwargs


DonatedKey = tuple[tuple[int, ...], Key, Key]


def split_donated(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], donated: Statics
) -> tuple[list[Any], list[Any], DonatedKey]:
    """``(donated array leaves, the other array leaves, static key)`` of a call, where
    ``donated`` says which arguments are donated as `jax.jit` decides it: a positional
    argument by its index (a negative number never matches, as in JAX), a keyword
    argument by its name. The key holds the donated positions and the `split` key of
    each part."""
    nums, names = donated.argnums, donated.argnames
    positions = tuple(index for index in range(len(args)) if index in nums)
    given = tuple(args[index] for index in positions)
    kept = tuple(arg for index, arg in enumerate(args) if index not in positions)
    given_kwargs = {name: value for name, value in kwargs.items() if name in names}
    kept_kwargs = {name: value for name, value in kwargs.items() if name not in names}
    donated_leaves, donated_key = split(given, given_kwargs)
    kept_leaves, kept_key = split(kept, kept_kwargs)
    return donated_leaves, kept_leaves, (positions, donated_key, kept_key)


def join_donated(
    donated: list[Any], kept: list[Any], key: DonatedKey
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's ``(args, kwargs)`` back from `split_donated`'s parts."""
    positions, donated_key, kept_key = key
    given, given_kwargs = join(donated, donated_key)
    rest, kwargs = join(kept, kept_key)
    args: list[Any] = []
    from_given, from_rest = iter(given), iter(rest)
    for index in range(len(given) + len(rest)):
        args.append(next(from_given) if index in positions else next(from_rest))
    kwargs.update(given_kwargs)
    return tuple(args), kwargs


def split_call(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], donated: Statics | None = None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What the `jax.jit` object gets for a call: ``((array leaves, key), {})``, or with
    ``donated`` (the donated arguments), ``((donated leaves, other leaves, key), {})``."""
    if donated is None:
        return split(args, kwargs), {}
    return split_donated(args, kwargs, donated), {}


def jit_kwargs(kwargs: Mapping[str, Any], donated: Statics | None) -> dict[str, Any]:
    """The `jax.jit` options of the split call: the key static (argument 1, or 2 after
    the donated leaves), and argument 0 donated in place of the user's donated
    arguments (``donated``; ``None``: none)."""
    options = {
        key: value
        for key, value in kwargs.items()
        if key not in ("donate_argnums", "donate_argnames")
    }
    if donated is None:
        return {**options, "static_argnums": 1}
    return {**options, "static_argnums": 2, "donate_argnums": 0}


def joined(
    counted: Callable[..., Any], name: str, qualname: str, donated: Statics | None = None
) -> Callable[..., Any]:
    """What `jax.jit` traces (with ``static_argnums=1``): the user's arguments put back
    together from the array leaves (tracers) and the static key, then ``counted``; with
    ``donated``, from the donated leaves, the others and the key (``static_argnums=2``,
    ``donate_argnums=0``)."""
    traced: Callable[..., Any]
    if donated is None:

        def traced_whole(dynamic: list[Any], key: Key) -> Any:
            args, kwargs = join(dynamic, key)
            return counted(*args, **kwargs)

        traced = traced_whole
    else:

        def traced_donated(donated: list[Any], kept: list[Any], key: DonatedKey) -> Any:
            args, kwargs = join_donated(donated, kept, key)
            return counted(*args, **kwargs)

        traced = traced_donated
    traced.__name__, traced.__qualname__ = name, qualname  # jit_<name>, as for the function
    return traced


def caller(
    jitted: Callable[..., Any],
    unhashable: Callable[[tuple[Any, ...], dict[str, Any]], str | None],
    donated: Statics | None = None,
) -> Callable[..., Any]:
    """The per-call path: split (with ``donated``, into the donated leaves, the others
    and the key: `split_donated`), call the compiled function, give back the user's
    output whole (an `Output` of `returning_parts`), and turn JAX's error about an
    unhashable static value into one that names the leaf (``unhashable`` finds it)."""
    parts: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]] = (
        split if donated is None else functools.partial(_split_donated, donated)
    )

    def call_static_nonarrays(*args: Any, **kwargs: Any) -> Any:
        jax_args = parts(args, kwargs)
        try:  # free unless something is raised (zero-cost exceptions)
            out = jitted(*jax_args)
        except (TypeError, ValueError) as error:  # JAX: ValueError for an unhashable key
            text = unhashable(args, kwargs)
            if text is not None:
                raise TypeError(text) from None
            private.filter_traceback(error)
            raise
        except Exception as error:
            private.filter_traceback(error)
            raise
        if type(out) is Output:
            return out.treedef.unflatten(out.arrays)
        return out

    return call_static_nonarrays


def _split_donated(
    donated: Statics, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    return split_donated(args, kwargs, donated)


def hashable(value: object) -> bool:
    try:
        hash(value)
    except Exception:
        return False
    return True


def _shown(value: object) -> str:
    """A leaf in a message: a function by its name, cut short, with its type."""
    from tinax._src.diagnosis.record import value_text

    return f"{value_text(value, 80)} ({type(value).__qualname__})"


def unhashable_message(api: str, path: str, value: object) -> str:
    return (
        f"{api}: with static_nonarrays=True every leaf that is not an array is static, and "
        f"JAX keys its cache on static values, so they must be hashable; the leaf {path} is "
        f"{_shown(value)}, which is not. Make it hashable (a tuple, not a list; "
        f"@dataclass(frozen=True)), register its class as a pytree, or make it an array."
    )


def refused_leaf_message(api: str, path: str, value: object) -> str:
    """tinax's words for a leaf `jax.jit` cannot trace (a function in a module)."""
    return (
        f"{api}: the argument leaf {path} is {_shown(value)}, not an array, and jax.jit "
        f"traces arrays only. Pass static_nonarrays=True to hold every leaf that is not an "
        f"array static (as eqx.filter_jit does), or split the model with "
        f"eqx.partition(model, eqx.is_array) and pass its static part by static_argnames."
    )


# --- wrap time -------------------------------------------------------------------------------

_BY_ARGUMENT = ("static_argnums", "static_argnames")


def check(api: str, value: object, parsed: Any, in_shardings: object) -> bool:
    """Checks ``static_nonarrays`` (a bool), then that no option makes arguments static
    or places them next to it: every leaf that is not an array is static already, and
    the call reaches `jax.jit` as lists of array leaves and one static key, where an
    ``in_shardings`` tree would not apply (``eqx.filter_jit`` refuses them too).
    ``donate_argnums``/``donate_argnames`` are taken: the array leaves of the donated
    arguments reach `jax.jit` as a donated list of their own (`split_donated`).
    ``parsed`` is `jax_options.parse`'s result."""
    from tinax._src.core.statics import UNSPECIFIED, check_bool

    flag = check_bool(api, "static_nonarrays", value)
    if not flag:
        return False
    given: list[tuple[str, object]] = [
        (name, getattr(parsed, name))
        for name in _BY_ARGUMENT
        if getattr(parsed, name) not in (None, ())
    ]
    if in_shardings is not UNSPECIFIED:
        given.append(("in_shardings", in_shardings))
    if given:
        name, shown = given[0]
        raise ValueError(
            f"{api}: {name} must be left unset when static_nonarrays=True (every leaf that is "
            f"not an array is static already, and the call reaches jax.jit as its array "
            f"leaves, where argument numbers and names do not apply; eqx.filter_jit refuses "
            f"them too); got {name}={shown!r}."
        )
    return True


def vmapped(
    function: Callable[..., Any],
    in_axes: Any,
    out_axes: Any,
    axis_size: int | None,
    vmap_options: dict[str, Any],
) -> Callable[..., Any]:
    """``jax.vmap(function)`` over the array leaves only: the others, static, never reach
    `jax.vmap` (it would refuse them) and are put back around each example.

    The arguments reach `jax.vmap` with ``None`` where a leaf is not an array, so
    that ``in_axes`` (a prefix of the arguments) applies as written. Runs at trace
    time only.
    """

    def batched(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = flatten((args, kwargs))
        statics = [None if is_array(leaf) else leaf for leaf in leaves]
        hollow_args, hollow_kwargs = treedef.unflatten(
            [leaf if is_array(leaf) else None for leaf in leaves]
        )

        def per_example(*inner: Any, **inner_kwargs: Any) -> Any:
            arrays = iter(flatten((inner, inner_kwargs))[0])
            full = [next(arrays) if leaf is None else leaf for leaf in statics]
            example_args, example_kwargs = treedef.unflatten(full)
            return marked(function(*example_args, **example_kwargs))

        vmap: Any = jax.vmap
        return vmap(
            per_example, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size, **vmap_options
        )(*hollow_args, **hollow_kwargs)

    return batched
