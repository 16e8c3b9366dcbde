"""``python -m tinax``: tinax's command line (``audit``: see ``python -m tinax audit -h``)."""

from tinax._src.audit.command import main

if __name__ == "__main__":
    raise SystemExit(main())
