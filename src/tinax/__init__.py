"""tinax: safe, observable JAX compilation."""

from tinax import jit as jit
from tinax import parallel as parallel
from tinax._src.warm.session import save_signatures as save_signatures
from tinax._src.warm.session import warm_start as warm_start

__version__ = "0.1.0"

__all__ = ["__version__", "jit", "parallel", "save_signatures", "warm_start"]

for _public in (save_signatures, warm_start):
    _public.__module__ = __name__
