"""tinax's implementation; the public names live in `tinax.jit` and `tinax.parallel`."""

import os as _os

from tinax._src import private as _private

# tinax's own frames (the counted function, the mesh scope) are hidden from tracebacks
# the way JAX hides its own, so that a TraceBudgetError ends at the user's call.
_private.hide_from_tracebacks(_os.path.dirname(__file__))
