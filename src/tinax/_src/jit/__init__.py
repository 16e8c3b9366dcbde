"""`tinax.jit`: the two classes and what builds them: `BoundedJit` (`bounded`), `BatchedJit`
(`batched`), in the order of the data path: the options declared once (`options`), checked
once into a plan (`plan`, the `jax.jit` options in `jax_options`), the calling conventions
(`conventions`, and `batching` for a `BatchedJit`'s statics), the build (`build`, with the
metadata a `jax.jit` object takes from its function in `metadata`), the methods both
classes share (`methods`), the words for a call JAX refuses (`call_errors`), the stand-in
that finds the error a call would raise (`probe`) and the mesh entered around a call
(`meshes`). The checks
they share with every layer are in `core/validation`."""
