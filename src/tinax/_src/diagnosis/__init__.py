"""Why a call traced, in three steps that only import backwards: what a trace looked
like (`record`, with `abstract` to give its arguments back), what differs between two
traces (`compare`, with `edge_hints` and `nnx_graphdef`), and the text a person reads
(`report`, with `elide` for lines that fit)."""
