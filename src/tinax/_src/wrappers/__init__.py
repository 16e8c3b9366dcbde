"""The two classes and what builds them: `BoundedJit` (`bounded`), `BatchedJit`
(`batched`), their shared building and introspection (`common`), the `jax.jit` options
parsed once (`jit_options`), the page's own checks (`validation`) and the mesh entered
around a call (`meshes`)."""
