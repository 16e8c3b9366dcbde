"""Model libraries' objects passed whole: equinox modules with non-array leaves
(`nonarrays`; what counts as an array is `core/statics`) and flax.nnx objects updated in
place (`nnx`, a room per idea)."""
