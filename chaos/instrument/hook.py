"""Putting the instrumented classes where an application looks for its client library's.

:func:`install` replaces ``confluent_kafka.Consumer`` with :class:`chaos.instrument.Consumer` and,
when kafka-python is installed, ``kafka.KafkaConsumer`` / ``kafka.consumer.KafkaConsumer`` with
:class:`chaos.instrument.KafkaConsumer`. An application that imports the class *after* ``install()`` —
``from confluent_kafka import Consumer``, ``from kafka import KafkaConsumer``, ``kafka.KafkaConsumer(...)``
— gets the instrumented one without a change.

Why eager imports rather than an import hook that patches on first import: the libraries are
imported here, once, when installing, so the swap cannot miss an import path (``importlib``,
``__import__``, a reload of the package) and nothing of the import system is wrapped; the cost is
importing a client library the application may not use (well under a second, once per process).

A framework-started member gets ``install()`` from ``chaos/instrument/site/sitecustomize.py``
(that directory on ``PYTHONPATH``, ``KAFKA_CHAOS_INSTRUMENT=1``), which Python's ``site`` module
runs at interpreter start-up, before the application's first import.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Swap:
    """One module attribute replaced: where, the library's object, the instrumented one."""

    module: str
    name: str
    original: Any
    replacement: Any


_installed: list[Swap] = []


def _targets() -> list[tuple[str, str, Any]]:
    """(module, attribute, instrumented class) for each installed library."""
    out: list[tuple[str, str, Any]] = []
    if importlib.util.find_spec("confluent_kafka") is not None:
        from chaos.instrument.consumer import Consumer

        out.append(("confluent_kafka", "Consumer", Consumer))
    if importlib.util.find_spec("kafka") is not None and importlib.util.find_spec("kafka.consumer.group") is not None:
        from chaos.instrument.kafka_python import KafkaConsumer

        # the two places kafka-python exports its class from (``from kafka import KafkaConsumer``,
        # ``from kafka.consumer import KafkaConsumer``); the defining module ``kafka.consumer.group``
        # keeps the library's, which the instrumented class subclasses
        out.extend((module, "KafkaConsumer", KafkaConsumer) for module in ("kafka", "kafka.consumer"))
    return out


def install() -> list[Swap]:
    """Swap the library classes for the instrumented ones (idempotent); returns what was swapped."""
    if _installed:
        return list(_installed)
    for module_name, attr, replacement in _targets():
        module = importlib.import_module(module_name)
        original = getattr(module, attr)
        if original is replacement:
            continue
        setattr(module, attr, replacement)
        _installed.append(Swap(module_name, attr, original, replacement))
    return list(_installed)


def uninstall() -> None:
    """Put the library's classes back (tests; an application has no reason to)."""
    while _installed:
        swap = _installed.pop()
        setattr(importlib.import_module(swap.module), swap.name, swap.original)


def installed() -> bool:
    return bool(_installed)
