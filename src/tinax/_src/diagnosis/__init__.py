"""Why a call traced, in steps that only import backwards: what a trace looked like
(`record`, with `abstract` to give its arguments back), what a difference is (`kinds`),
whether JAX would reuse a trace (`reuse`), where two traces differ (`static_values`,
`compare`, with `edge_hints` and `nnx_graphdef`), and the text a person reads (`report`,
with `elide` for lines that fit)."""
