"""The foundation every other folder stands on: the checks and the message template of
every option (`validation`, with the remembered signature `LazySignature`), which
arguments are static, the other words of `jax.jit`'s options and what counts as an
array (`statics`). Imports nothing of tinax but `private`."""
