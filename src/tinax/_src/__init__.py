"""Private implementation of tinax; import from the public modules instead."""
