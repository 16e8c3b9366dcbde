"""The audit as data: JSON of every function and trace, and Chrome trace events of every
trace, lowering and compile (Perfetto and chrome://tracing open them)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import attrs

from tinax._src.audit.functions import AuditedFunction
from tinax._src.audit.recorder import Book
from tinax._src.audit.report import call_sites

FORMAT = "tinax.audit/1"


def as_data(functions: Sequence[AuditedFunction], unattributed: float) -> dict[str, Any]:
    """The audit as plain data (what ``to_json`` writes)."""
    return {
        "format": FORMAT,
        "functions": [attrs.asdict(function) for function in functions],
        "call_sites": [attrs.asdict(site) for site in call_sites(functions)],
        "unattributed_seconds": unattributed,
    }


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2)
        file.write("\n")


def chrome_trace(books: Sequence[Book]) -> dict[str, Any]:
    """One complete event (``"ph": "X"``) per trace, lowering and compile, in microseconds
    from the audit's opening, on the thread that ran it; ``args`` name the function, the
    trace number and its call site."""
    pid = os.getpid()
    events: list[dict[str, Any]] = []
    for book in books:
        for trace in book.traces:
            for span in trace.spans:
                events.append(
                    {
                        "name": f"{span.kind} {book.name} #{trace.number}",
                        "cat": span.kind,
                        "ph": "X",
                        "ts": round(span.start * 1e6, 3),
                        "dur": round(span.seconds * 1e6, 3),
                        "pid": pid,
                        "tid": trace.thread,
                        "args": {
                            "function": book.name,
                            "defined_at": book.defined_at,
                            "trace": trace.number,
                            "called_at": trace.called_at,
                        },
                    }
                )
    events.sort(key=lambda event: (event["ts"], -event["dur"]))
    return {"traceEvents": events, "displayTimeUnit": "ms"}
