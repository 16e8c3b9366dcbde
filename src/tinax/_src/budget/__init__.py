"""The count: the counted function that reserves, refuses and commits traces
(`counting`), the error a call that cannot succeed raises instead of a refusal
(`rejections`), the XLA compiles an object causes (`compiles`) and the scope of
`no_new_compiles` (`compile_guard`). One object's mutable state is the layer below,
`ledger`."""
