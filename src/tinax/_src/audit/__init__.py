"""``tinax.audit``: every trace of every jitted function of a program, heard while the audit
is open (`recorder`), compared by tinax's diagnosis and costed (`functions`), with the line
that ports each to ``bounded_jit`` (`port`), written as text (`report`) or data (`export`),
for a block of code (`session`) or a whole script (`command`)."""
