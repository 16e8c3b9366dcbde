"""The count: the mutable state of one object (`ledger`), the counted function that
reserves, refuses and commits traces (`counting`), the error a call that cannot succeed
raises instead of a refusal (`rejections`), and the XLA compiles an object causes
(`compiles`)."""
