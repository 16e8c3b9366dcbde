"""tinax: safe, observable JAX compilation."""

from importlib import metadata as _metadata

from tinax import jit as jit
from tinax import parallel as parallel
from tinax._src.warm.start import save_signatures as save_signatures
from tinax._src.warm.start import warm_start as warm_start

try:  # one version: pyproject.toml's, as installed (the changelog's newest heading is tested)
    __version__: str = _metadata.version("tinax")
except _metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "jit", "parallel", "save_signatures", "warm_start"]

for _public in (save_signatures, warm_start):
    _public.__module__ = __name__
