"""What the tests share and do not test: hypothesis strategies, the matrix's modes, static
values, the program runner (`helpers.processes`) and the pages' output checks
(`helpers.pages`). Imported as ``helpers.<module>`` (pytest puts ``tests/`` on the path)."""
