"""The instrumented consumers' tests: each starts with no member environment, no open recorder and the
library's own classes in place (the hook uninstalled after it)."""

import pytest

from chaos.instrument import hook
from chaos.instrument.recorder import Recorder


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for var in ("KAFKA_CHAOS_EVENTS", "KAFKA_CHAOS_MEMBER", "KAFKA_CHAOS_GROUP", "KAFKA_CHAOS_INSTRUMENT"):
        monkeypatch.delenv(var, raising=False)
    Recorder._open.clear()
    yield
    hook.uninstall()
    Recorder._open.clear()
