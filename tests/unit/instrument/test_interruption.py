"""A stop asked for inside an instrumented client call is raised when the call returns (chaos.instrument.interruption).

A real signal (SIGUSR2, handled as run_app handles SIGTERM) is raised inside a decorated call standing in for
``poll`` running a rebalance callback: the callback's recording must complete before SystemExit surfaces.
"""

from __future__ import annotations

import signal
import threading

import pytest

from chaos.instrument.interruption import held, interrupt


@pytest.fixture
def stop_on_usr2():
    before = signal.signal(signal.SIGUSR2, lambda _signum, frame: interrupt(SystemExit(0), frame))
    yield
    signal.signal(signal.SIGUSR2, before)


def test_a_signal_inside_a_call_is_raised_when_it_returns(stop_on_usr2):
    recorded: list[str] = []

    @held
    def poll() -> str:
        signal.raise_signal(signal.SIGUSR2)  # the handler runs here, inside the "rebalance callback"
        recorded.append("revoked")
        return "msg"

    with pytest.raises(SystemExit):
        poll()
    assert recorded == ["revoked"]


def test_outside_a_call_it_is_raised_at_once(stop_on_usr2):
    with pytest.raises(SystemExit):
        signal.raise_signal(signal.SIGUSR2)


def test_nested_calls_raise_at_the_outermost_return(stop_on_usr2):
    seen: list[str] = []

    @held
    def commit() -> None:
        signal.raise_signal(signal.SIGUSR2)
        seen.append("inner done")

    @held
    def close() -> None:
        commit()
        seen.append("outer done")

    with pytest.raises(SystemExit):
        close()
    assert seen == ["inner done", "outer done"]


def test_a_call_that_raises_still_stops_with_its_error_as_context(stop_on_usr2):
    @held
    def poll() -> None:
        signal.raise_signal(signal.SIGUSR2)
        raise RuntimeError("broker gone")

    with pytest.raises(SystemExit) as exc:
        poll()
    assert isinstance(exc.value.__context__, RuntimeError)
    # nothing is left held for the next call
    assert held(lambda: 1)() == 1


def test_another_threads_call_does_not_hold_the_main_thread(stop_on_usr2):
    inside, release = threading.Event(), threading.Event()

    @held
    def poll_in_background() -> None:
        inside.set()
        release.wait(5)

    t = threading.Thread(target=poll_in_background)
    t.start()
    try:
        assert inside.wait(5)
        with pytest.raises(SystemExit):
            signal.raise_signal(signal.SIGUSR2)
    finally:
        release.set()
        t.join(5)


def test_a_waiting_call_stops_at_once_where_it_waits_but_not_inside_its_callbacks(stop_on_usr2):
    steps: list[str] = []

    def rebalance_callback() -> None:
        signal.raise_signal(signal.SIGUSR2)  # handled in this frame: held
        steps.append("revoked recorded")

    @held(waits=True)
    def poll(callback: bool) -> None:
        if callback:
            rebalance_callback()
            steps.append("poll returns")
            return
        signal.raise_signal(signal.SIGUSR2)  # handled in poll's own frame (the library waiting): at once
        steps.append("never")

    with pytest.raises(SystemExit):
        poll(callback=True)
    assert steps == ["revoked recorded", "poll returns"]
    steps.clear()
    with pytest.raises(SystemExit):
        poll(callback=False)
    assert steps == []
