"""`tinax.jit`: the two classes and what builds them: `BoundedJit` (`bounded`), `BatchedJit`
(`batched`), their shared building and introspection (`common`), the `jax.jit` options
parsed once (`jax_options`) and the mesh entered around a call (`meshes`). The checks
they share with every layer are in `core/validation`."""
