"""tinax: safe, observable JAX compilation."""

from importlib import metadata as _metadata

from tinax import jit as jit
from tinax import parallel as parallel
from tinax._src.audit.functions import AuditedFunction as AuditedFunction
from tinax._src.audit.functions import Miss as Miss
from tinax._src.audit.session import Audit as Audit
from tinax._src.audit.session import audit as audit
from tinax._src.warm.start import save_signatures as save_signatures
from tinax._src.warm.start import warm_start as warm_start

try:  # one version: pyproject.toml's, as installed (the changelog's newest heading is tested)
    __version__: str = _metadata.version("tinax")
except _metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"

__all__ = [
    "Audit",
    "AuditedFunction",
    "Miss",
    "__version__",
    "audit",
    "jit",
    "parallel",
    "save_signatures",
    "warm_start",
]

for _public in (Audit, AuditedFunction, Miss, audit, save_signatures, warm_start):
    _public.__module__ = __name__
