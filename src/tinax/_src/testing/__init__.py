"""`tinax.testing`: values drawn at a fixed abstract signature (`strategies`, which needs
hypothesis) and the scopes that assert nothing traces or compiles (`scopes`)."""
