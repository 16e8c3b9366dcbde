"""Property tests of budgeted functions with hypothesis: values drawn at a fixed abstract
signature, an assertion that nothing traces again, and a scope in which nothing compiles.

The scopes, `no_new_traces` and `no_new_compiles`, need nothing beyond tinax: a serving
process imports them without a test library. `arguments`, the hypothesis strategy, needs
hypothesis, an optional dependency (``pip install 'tinax[testing]'``); it is imported when
first used, and without hypothesis using it raises an `ImportError` that names the extra.
"""

from typing import TYPE_CHECKING

from tinax._src.testing.scopes import no_new_compiles as no_new_compiles
from tinax._src.testing.scopes import no_new_traces as no_new_traces

if TYPE_CHECKING:
    from tinax._src.testing.strategies import arguments as arguments
del TYPE_CHECKING  # not a name of this module (dir(), autocomplete)

__all__ = ["arguments", "no_new_compiles", "no_new_traces"]

for _public in (no_new_compiles, no_new_traces):
    _public.__module__ = __name__


def __getattr__(name: str) -> object:
    """`arguments`, imported on first use (it needs hypothesis); nothing else."""
    if name != "arguments":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tinax._src.testing.strategies import arguments  # the ImportError names the extra

    arguments.__module__ = __name__
    globals()[name] = arguments
    return arguments


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
