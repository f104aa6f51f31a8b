"""Benchmark: the full checker suite on simulated histories of 10^4 .. 10^7 events.

Usage: ``python bench/checkers.py [--max-events 1000000] [--seed 1] [--no-parse]``

For each size (one per decade from 10^4 up to ``--max-events``) it simulates a
history (not timed), writes it to a temporary ``history.jsonl`` and times
``read_history`` (parse, reported separately), then times ``run_checkers``
with every registered checker on the parsed history. Times are CPU seconds of
this process (``time.process_time``: the target is per core, and wall time on
a shared machine measures the neighbours); wall seconds are printed too. It
prints events/s for both, end to end (parse + check: what ``chaos check``
spends on a run before printing; issue 15's target is 10^6 events/s on one
core) and the growth ratio of end-to-end time per decade (10.0 = linear).
With ``--floor`` it also times, on the same file, what no Python checker can go
below: msgspec's typed decode of every line in one call (no records built, no
order check), ``orjson.loads`` per line, and Arrow's C++ JSON reader on one thread
building nine scalar columns (no Python object per event) — the JSON-lines history's own cost.
Run it on one core: ``taskset -c 1 python bench/checkers.py``.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import orjson

from chaos.checkers.registry import run_checkers
from chaos.checkers.result import Validity
from chaos.history import read_history, write_history
from chaos.history.event import _WIRE_DECODER

#: the repository root, for the simulated histories: ``tests.simulation`` is test code, not shipped with chaos
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.simulation import SimulationSpec, simulate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-events", type=int, default=1_000_000, help="largest size (default 10^6; 10^7 needs ~15 GB)")
    ap.add_argument("--min-events", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--no-parse", action="store_true", help="skip the write/parse timing")
    ap.add_argument("--floor", action="store_true",
                    help="also time the bare JSON decode of the same file (msgspec typed, orjson per line)")
    args = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}  pid {os.getpid()}  (single process, one core; CPU seconds)")
    print(f"{'events':>10} {'gen s':>7} {'parse s':>8} {'parse ev/s':>11} {'check s':>8} {'check ev/s':>11} "
          f"{'e2e s':>7} {'e2e ev/s':>9} {'x/decade':>8} {'wall s':>7} {'maxrss MB':>9}  verdict")
    prev = None
    n = args.min_events
    while n <= args.max_events:
        spec = SimulationSpec(seed=args.seed, events=n, members=args.members, partitions=args.partitions)
        t = time.perf_counter()
        history = simulate(spec)
        gen_s = time.perf_counter() - t
        events = len(history.events)
        parse_s = float("nan")
        if not args.no_parse:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "history.jsonl"
                write_history(path, history)
                del history
                gc.collect()
                if args.floor:
                    _print_floor(path)
                t = time.process_time()
                history = read_history(path)
                parse_s = time.process_time() - t
        gc.collect()
        t = time.process_time()
        w = time.perf_counter()
        verdict = run_checkers(history)
        check_s = time.process_time() - t
        wall_s = time.perf_counter() - w
        e2e_s = check_s if args.no_parse else parse_s + check_s
        ratio = "" if prev is None else f"{e2e_s / prev:8.2f}"
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{events:>10} {gen_s:7.2f} {parse_s:8.2f} {events / parse_s:11.0f} {check_s:8.2f} "
              f"{events / check_s:11.0f} {e2e_s:7.2f} {events / e2e_s:9.0f} {ratio:>8} {wall_s:7.2f} {rss:9.0f}  "
              f"{verdict.valid.value}", flush=True)
        if verdict.valid is not Validity.TRUE:
            for r in verdict.results:
                if r.valid is not Validity.TRUE:
                    print(f"   {r.checker.value}: {r.valid.value}: {r.summary}")
        prev = e2e_s
        del history, verdict
        gc.collect()
        n *= 10
    return 0


def _print_floor(path: Path) -> None:
    """CPU time of decoding ``path``'s events and nothing else (collector off, as in ``read_history``)."""
    data = path.read_bytes()
    body = data[data.find(b"\n") + 1:]
    lines = body.count(b"\n")
    gc.disable()
    try:
        t = time.process_time()
        wire = _WIRE_DECODER.decode_lines(body)
        typed_s = time.process_time() - t
        del wire
        t = time.process_time()
        dicts = [orjson.loads(line) for line in body.splitlines()]
        dicts_s = time.process_time() - t
        del dicts
        columns_s = _columnar_decode_s(body)
    finally:
        gc.enable()
    print(f"{'':>10} floor: msgspec typed decode {typed_s:.2f} s ({typed_s / lines * 1e6:.2f} us/event), "
          f"orjson per line {dicts_s:.2f} s ({dicts_s / lines * 1e6:.2f} us/event), "
          f"pyarrow.json {len(_SCALARS)} scalar columns {columns_s:.2f} s ({columns_s / lines * 1e6:.2f} us/event), "
          f"{len(body) / lines:.0f} bytes/event", flush=True)


#: the scalar fields the checkers read most; the array fields are left out because Arrow's JSON reader
#: refuses them: a partition is a ``[topic, partition]`` pair, a list mixing strings and numbers
_SCALARS = (("seq", "int64"), ("mono_ns", "int64"), ("source", "string"), ("kind", "string"),
            ("generation", "int64"), ("member_id", "string"), ("topic", "string"), ("partition", "int64"),
            ("offset", "int64"))


def _columnar_decode_s(body: bytes) -> float:
    """CPU seconds of Arrow's C++ JSON reader (one thread) turning the lines into :data:`_SCALARS` columns.

    What a columnar reader of the same JSON lines would cost before any checker: no Python object per
    event, the other fields skipped by the parser.
    """
    import pyarrow as pa
    from pyarrow import json as pa_json

    schema = pa.schema(list(_SCALARS))
    t = time.process_time()
    table = pa_json.read_json(pa.BufferReader(body),
                              read_options=pa_json.ReadOptions(use_threads=False, block_size=1 << 24),
                              parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                                                 unexpected_field_behavior="ignore"))
    spent = time.process_time() - t
    del table
    return spent


if __name__ == "__main__":
    raise SystemExit(main())
