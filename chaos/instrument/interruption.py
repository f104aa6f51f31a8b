"""Stopping an application between its client calls, never inside one.

kafka-chaos stops an ``app`` member with SIGTERM, which raises ``SystemExit`` in the application's loop
(:func:`chaos.workload.application.run_app`) so that its own ``finally`` closes the consumer. Python runs a
signal handler at the next bytecode boundary of the main thread, so a signal that arrives while librdkafka
works in C is handled at the first bytecode of the next Python callback it calls: the rebalance callback,
before any ``try`` of it. The exception then skips the recording of a revocation that the library still
carries out (confluent-kafka's ``Consumer_rebalance_cb`` unassigns when the callback did not), and the
ownership checkers see the partitions held by two members (kafka-python 3 runs its rebalance callbacks on its
own IO thread, where no signal handler runs). The python-service example
(``orders-paused-past-session-timeout``) failed so once: the teardown stopped
consumer-0, whose leave started a rebalance, and signalled consumer-1 a few milliseconds later; consumer-1's
next recorded event was generation 5's assignment, generation 4's partitions never revoked (the cause as
the history shows it; the moment of the signal inside the callback is inferred, not seen).

So while the main thread is inside an instrumented client call (:func:`held`), an interruption is kept and
raised when the call returns, after the call's own events are recorded, also when the call raised (the stop
was asked for; the call's exception is its ``__context__``). Except where the call only waits: a handler run
with a ``waits`` method's own frame on top (librdkafka checking for signals while it waits in ``poll`` /
``consume``, or a statement of that method between its steps) raises at once, as without instrumentation,
so a stop never waits for a long poll timeout. ``close`` and ``commit`` hold it to their end. Signal handlers
run in the main thread only (Python's ``signal`` module), so only the main thread's calls hold an
interruption; another thread's calls never delay it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _MainThread:
    """How deep the main thread is in instrumented client calls, and the interruption it holds."""

    depth = 0
    pending: BaseException | None = None


#: code of the methods that may raise an interruption where their own frame is on top (they wait in the library)
_WAITING: set[CodeType] = set()


def interrupt(exc: BaseException, frame: FrameType | None = None) -> None:
    """From a signal handler (``frame``: the one it was given): raise ``exc`` now, or, inside a client call,
    when that call returns (module docstring)."""
    if _MainThread.depth and not (frame is not None and frame.f_code in _WAITING):
        _MainThread.pending = exc
        return
    raise exc


def held(method: F | None = None, *, waits: bool = False) -> Any:
    """Decorate an instrumented client method: an :func:`interrupt` during it is raised when it returns.
    ``waits``: the method waits in the library (``poll``, ``consume``): an interrupt with its own frame on top
    is raised at once."""
    if method is None:
        return functools.partial(held, waits=waits)
    if waits:
        _WAITING.add(method.__code__)

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return method(*args, **kwargs)
        _MainThread.depth += 1
        try:
            return method(*args, **kwargs)
        finally:
            _MainThread.depth -= 1
            if _MainThread.depth == 0 and _MainThread.pending is not None:
                # also when the call raised: the stop was asked for (the call's exception is its context)
                exc, _MainThread.pending = _MainThread.pending, None
                raise exc

    return call
