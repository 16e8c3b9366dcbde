"""Shape buckets: the sizes an axis of an argument may take, declared once (`declared`),
the usual lists of them and padding to them (`sizes`), and the check at trace time that
names a call outside them before it traces."""
