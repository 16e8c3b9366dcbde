"""Draws the benchmark chart from recorded results, with no benchmark run.

Run from the repository root:
    python benchmarks/plot.py benchmarks/data/cpu-jax-0.10.2.json docs/img/benchmarks.png

The source is a data set (`results.py`): one that ``run.py --record`` keeps under
``benchmarks/data/``, or the ``results.json`` of a run's ``--out`` folder. Every contender
of every row that is not its row's baseline is a bar. (`figures.py` draws the chart of
docs/benchmarks.md this way, with the page's tables.)
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from results import bars, draw, load


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=pathlib.Path, help="a data set (JSON) of results")
    parser.add_argument("out", type=pathlib.Path, help="the picture to write (PNG)")
    options = parser.parse_args(argv)
    drawn = bars(load(options.source)["rows"])
    if not drawn:
        parser.error(f"no results in {options.source}")
    draw(drawn, options.out)
    print(f"wrote {options.out}: {len(drawn)} bars")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
