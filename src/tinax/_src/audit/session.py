"""``tinax.audit()``: the context manager, and the `Audit` it gives."""

from __future__ import annotations

import os
import threading
from types import TracebackType

from tinax._src.audit import export
from tinax._src.audit.functions import AuditedFunction, audited
from tinax._src.audit.recorder import Recorder
from tinax._src.audit.report import API, check_top, report


class Audit:
    """Every trace of every jitted function of the program while it was open.

    Made by `tinax.audit`; readable while open (what has traced so far) and after.
    Each read compares the traces again, so read it once the code audited has run.

    Attributes:
        functions: The functions that traced (`AuditedFunction`), most costly first
            (seconds in traces, lowerings and compiles; then traces).
    """

    def __init__(self) -> None:
        self._recorder = Recorder()
        self._lock = threading.Lock()
        self._open = False
        self._closed = False

    def __enter__(self) -> Audit:
        with self._lock:
            if self._open or self._closed:
                raise RuntimeError("tinax.audit: an Audit is entered once; make a new one.")
            self._recorder.open()
            self._open = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._lock:
            if self._open:
                self._recorder.close()
                self._open, self._closed = False, True

    @property
    def functions(self) -> list[AuditedFunction]:
        with self._recorder.lock:
            books = list(self._recorder.books.values())
        found = [audited(book) for book in books]
        found.sort(key=lambda function: (-function.seconds, -function.traces))
        return found

    def report(self, top: int | None = None) -> str:
        """The audit as text: totals, then the functions most costly first, each with
        where it is defined, its traces, compiles and seconds, each retrace's call site,
        differences and fix, and its port line; then the call sites that retrace most.

        Args:
            top: How many functions to list (the most costly); ``None`` (the default)
                lists every one. The totals and the call sites count them all.

        Returns:
            The report, lines of at most about 120 characters.

        Raises:
            TypeError: If ``top`` is not an int or ``None`` (a bool is not accepted).
            ValueError: If ``top`` is less than 1.
        """
        shown = check_top(API, top)
        return report(self.functions, shown, self._recorder.unattributed)

    def to_json(self, path: str | os.PathLike[str]) -> None:
        """Writes the audit as JSON to ``path``: ``format``, ``functions`` (each field of
        `AuditedFunction`, its ``misses`` as objects), ``call_sites`` and
        ``unattributed_seconds`` (JAX's own jits and compiles of no function heard)."""
        export.write_json(path, export.as_data(self.functions, self._recorder.unattributed))

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes Chrome trace events of every trace, lowering and compile to ``path``
        (open it in Perfetto or chrome://tracing)."""
        with self._recorder.lock:
            books = list(self._recorder.books.values())
        export.write_json(path, export.chrome_trace(books))

    def __repr__(self) -> str:
        state = "open" if self._open else ("closed" if self._closed else "not entered")
        with self._recorder.lock:
            traces = sum(len(book.traces) for book in self._recorder.books.values())
            count = len(self._recorder.books)
        return f"Audit({state}, functions={count}, traces={traces})"


def audit() -> Audit:
    """Records every trace of every jitted function run inside the ``with`` block.

    ``jax.jit`` (decorated or called), ``equinox.filter_jit``, ``flax.nnx.jit`` and
    tinax's own objects, whoever wrote them; JAX's internal jits (the ``jax.numpy``
    functions) are left out, as JAX's own cache-miss explanation leaves them out.
    Each trace after a function's first is compared with the closest earlier one by
    tinax's diagnosis. JAX is hooked only while the block runs and is left exactly as
    it was after it; outside an audit nothing of tinax runs.

    Returns:
        An `Audit`, to enter with ``with``; read it inside or after the block.

    Examples:
        >>> import jax, jax.numpy as jnp, tinax
        >>> f = jax.jit(lambda x: x * 2)
        >>> with tinax.audit() as audit:
        ...     _ = f(jnp.ones(3)); _ = f(jnp.ones(4))
        >>> [(function.name, function.traces) for function in audit.functions]
        [('<lambda>', 2)]
    """
    return Audit()
