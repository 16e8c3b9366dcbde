"""Manual SPMD over a mesh: `jax.shard_map`, validated at wrap time."""

from tinax._src.shard_mapped import ShardMapped as ShardMapped
from tinax._src.shard_mapped import shard_mapped as shard_mapped

__all__ = ["ShardMapped", "shard_mapped"]

for _public in (ShardMapped, shard_mapped):
    _public.__module__ = __name__
