"""Property tests of budgeted functions with hypothesis: values drawn at a fixed abstract
signature, an assertion that nothing traces again, and a scope in which nothing compiles.

Needs hypothesis, an optional dependency: ``pip install 'tinax[testing]'``.
"""

from tinax._src.testing.scopes import no_new_compiles as no_new_compiles
from tinax._src.testing.scopes import no_new_traces as no_new_traces
from tinax._src.testing.strategies import arguments as arguments

__all__ = ["arguments", "no_new_compiles", "no_new_traces"]

for _public in (arguments, no_new_compiles, no_new_traces):
    _public.__module__ = __name__
