"""The errors of ``propagate_updates``: updates a trace would lose, a change of structure
the write-back cannot carry, and arguments that hold a cycle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinax._src.diagnosis import report

# An array attribute (an nnx.Pytree's nnx.data array) given a new array: only Variables are
# written back, so it is a change of structure to the write-back.
ARRAY_ASSIGNED = "a new array assigned, not held in a Variable"


def heading(function: Callable[..., Any]) -> str:
    where = report.function_location(function)
    return report.function_name(function) + (f" ({where})" if where else "")


def cycle_message(function: Callable[..., Any], cycle: tuple[str, str, str]) -> str:
    """The error for arguments that hold a cycle (``find_cycle``)."""
    name, path, target = cycle
    return (
        f"{heading(function)}: the argument {name} holds a cycle: {path} is {target}, which "
        f"holds it.\nJAX flattens arguments as trees, and the flatten of a cycle does not end "
        f"(it would use up Python's recursion limit): this call is refused before it.\n"
        f"Fix: keep the back reference out of the object's attributes (pass it as an argument "
        f"of its own),\n  or split the objects with nnx.split and pass the GraphDef as a static "
        f"argument and the State\n  (nnx.jit in graph mode takes a cycle; jax.jit and "
        f"nnx.jit(graph=False) do not)."
    )


def lost_message(
    function_name: str, paths: list[str], restructured: list[str], *, batched: bool = False
) -> str:
    if paths:
        what = "assigns flax.nnx Variables of its arguments and does not return their new values"
    else:
        what = "changes the structure of flax.nnx objects of its arguments and does not return them"
    lines = [
        f"{function_name}: this trace {what}; jax.jit would drop them silently, after every call:"
    ]
    lines.extend(f"  {path}" for path in paths)
    lines.extend(f"  {line} (a change of structure)" for line in restructured)
    if batched:
        lines.append(
            "Fix: return the objects from the function, with out_axes for them, and use the "
            "returned ones: under batched_jit each example assigns its own value, which cannot "
            "be written back into one object."
        )
    else:
        lines.append(
            "Fix: return the objects from the function (return model, optimizer, loss) and use "
            "the returned ones,"
        )
        if paths:
            lines.append(
                "  or wrap with propagate_updates=True: the new values are written back into the "
                "caller's objects after every call, as nnx.jit does"
                + (
                    " (the values of Variables: a change of structure is refused there)."
                    if restructured
                    else "."
                )
            )
        else:
            lines.append(
                "  or make the change outside the function (propagate_updates=True writes back "
                "the values of Variables, and refuses a change of structure)."
            )
    lines.append("  (propagate_updates=False drops them, as jax.jit does.)")
    return "\n".join(lines)


def structure_message(function_name: str, restructured: list[str]) -> str:
    lines = [
        f"{function_name}: this trace changed the structure of flax.nnx objects of its arguments:"
    ]
    lines.extend(f"  {line}" for line in restructured)
    lines.append(
        "propagate_updates=True writes back the values of the Variables the objects held when "
        "the call began, not a change of structure (nnx.jit's graph mode applies it)."
    )
    lines.append(
        "Fix: make the change outside the function (the next call flattens the objects again; "
        "the same structure reuses the trace),"
    )
    arrays_assigned = [line for line in restructured if line.endswith(": " + ARRAY_ASSIGNED)]
    if arrays_assigned:
        path = arrays_assigned[0].rpartition(": ")[0]
        attribute = path.rpartition(".")[2]
        lines.append(
            f"  or hold the array in a Variable (self.{attribute} = nnx.Variable(...) where the "
            f"object is built, then {path}[...] = value in the step): only the values of "
            "Variables are written back."
        )
    if len(arrays_assigned) < len(restructured):
        lines.append(
            "  or assign the Variable's value in place (model.counter[...] = value) rather than a "
            "new Variable."
        )
    return "\n".join(lines)
