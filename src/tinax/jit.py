"""Safe, observable `jax.jit`: exact per-object trace budgets, wrap-time validation, meshes."""

from tinax._src.buckets.dims import Buckets as Buckets
from tinax._src.buckets.ragged import bucket_for as bucket_for
from tinax._src.buckets.ragged import pad_ragged as pad_ragged
from tinax._src.buckets.sizes import Dim as Dim
from tinax._src.buckets.sizes import bucket_sizes as bucket_sizes
from tinax._src.buckets.sizes import pad_to_bucket as pad_to_bucket
from tinax._src.diagnosis.errors import TraceBudgetError as TraceBudgetError
from tinax._src.diagnosis.errors import TraceBudgetWarning as TraceBudgetWarning
from tinax._src.diagnosis.explanation import Explanation as Explanation
from tinax._src.diagnosis.history import TraceHistory as TraceHistory
from tinax._src.diagnosis.kinds import Difference as Difference
from tinax._src.diagnosis.record import Leaf as Leaf
from tinax._src.diagnosis.record import TracedSignature as TracedSignature
from tinax._src.jit.batched import BatchedJit as BatchedJit
from tinax._src.jit.batched import batched_jit as batched_jit
from tinax._src.jit.bounded import BoundedJit as BoundedJit
from tinax._src.jit.bounded import bounded_jit as bounded_jit
from tinax._src.observe.policy import exceed_policy as exceed_policy
from tinax._src.observe.registry import Budgets as Budgets
from tinax._src.observe.registry import budgets as budgets

__all__ = [
    "BatchedJit",
    "BoundedJit",
    "Buckets",
    "Budgets",
    "Difference",
    "Dim",
    "Explanation",
    "Leaf",
    "TraceBudgetError",
    "TraceBudgetWarning",
    "TraceHistory",
    "TracedSignature",
    "batched_jit",
    "bounded_jit",
    "bucket_for",
    "bucket_sizes",
    "budgets",
    "exceed_policy",
    "pad_ragged",
    "pad_to_bucket",
]

for _public in (BatchedJit, BoundedJit, Difference, Leaf, TraceBudgetError, TraceHistory):
    _public.__module__ = __name__
for _public in (Explanation, TracedSignature, batched_jit, bounded_jit):
    _public.__module__ = __name__
for _public in (Budgets, TraceBudgetWarning, budgets, exceed_policy):
    _public.__module__ = __name__
for _public in (Buckets, Dim, bucket_for, bucket_sizes, pad_ragged, pad_to_bucket):
    _public.__module__ = __name__
