"""Manual SPMD over a mesh (`jax.shard_map`, validated at wrap time), and multi-process
jobs that fail fast."""

from tinax._src.parallel.job_failure import fail_fast as fail_fast
from tinax._src.parallel.shard_mapped import ShardMapped as ShardMapped
from tinax._src.parallel.shard_mapped import shard_mapped as shard_mapped

__all__ = ["ShardMapped", "fail_fast", "shard_mapped"]

for _public in (ShardMapped, fail_fast, shard_mapped):
    _public.__module__ = __name__
