"""tinax: safe, observable JAX compilation."""

from tinax import jit as jit
from tinax import parallel as parallel

__version__ = "0.1.0"

__all__ = ["__version__", "jit", "parallel"]
