"""Model libraries' objects passed whole: equinox modules with non-array leaves
(`nonarrays`, with `arrays` for what counts as an array) and flax.nnx objects updated in
place (`nnx_updates`)."""
