"""Run at interpreter start-up by Python's ``site`` module when this directory is on ``PYTHONPATH``.

With ``KAFKA_CHAOS_INSTRUMENT=1`` it installs :mod:`chaos.instrument.hook` before the application's
first import, so the application's ``confluent_kafka.Consumer`` or ``kafka.KafkaConsumer`` records
(see :mod:`chaos.instrument`).
A ``sitecustomize`` found further along ``sys.path`` (a distribution's own) still runs, after this one:
this file must not hide it. If instrumenting was asked for and cannot be done, the process says so
in one line on stderr and exits 2: a member that silently records nothing would leave its checkers
without evidence.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _instrument() -> None:
    if os.environ.get("KAFKA_CHAOS_INSTRUMENT", "") != "1":
        return
    try:
        from chaos.instrument.hook import install

        install()
    except Exception as exc:  # noqa: BLE001 - any failure here means the member cannot be instrumented
        sys.stderr.write(f"kafka-chaos: cannot instrument this process ({type(exc).__name__}: {exc}); "
                         "put kafka-chaos on PYTHONPATH or unset KAFKA_CHAOS_INSTRUMENT\n")
        sys.stderr.flush()
        os._exit(2)


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (this module took its name)."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_instrument()
_chain()
