"""Programs the tests run in fresh processes, each through `helpers.processes`: the warm
restarts, the multi-process jobs and the matrix's warm column. Each is a script (``main()``
under ``if __name__ == "__main__"``); tests may import their pure helpers."""
