"""Experiment files: reading, the catalogue, the JSON Schema (the records are :mod:`chaos.model.experiment`).

An experiment file is YAML read strictly (:mod:`chaos.spec_file`) and
validated into :class:`chaos.model.experiment.Experiment`; every problem is one
line naming the file, the field and what to change. The catalogue ships with
the package (``chaos/catalogue``); ``./experiments/`` and ``--dir`` add to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from chaos.errors import UsageError
from chaos.model.cluster import validate_kafka_version

# the records themselves live in the model layer; this module reads them from files
from chaos.model.experiment import Experiment
from chaos.model.faults import declarations
from chaos.model.workload import Client


def _error_line(source: str, exc: ValidationError) -> str:
    """One line for a pydantic error: ``SOURCE: FIELD: what is wrong (got VALUE)`` and how many more."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    # a fault's errors are located inside its kind's model (``faults.0.kill.peer``): the kind is the fault's
    # ``type``, not a field the file has
    kinds = declarations()
    in_kind = len(err["loc"]) > 2 and err["loc"][0] == "faults" and err["loc"][2] in kinds
    kind = str(err["loc"][2]) if in_kind else None
    parts = [p for i, p in enumerate(err["loc"]) if not (in_kind and i == 2)]
    loc = ".".join(str(p) for p in parts)
    msg = err["msg"].removeprefix("Value error, ")
    if kind is not None and err["type"] == "missing":
        # a field the kind needs: name it from the fault (``latency needs params.latency_ms``)
        field = ".".join(str(p) for p in parts[2:])
        if field == "params":
            params = kinds[kind].model_fields["params"].annotation
            required = [n for n, f in getattr(params, "model_fields", {}).items() if f.is_required()]
            field = f"params.{required[0]}" if required else field
        msg, loc = f"{kind} needs {field}", ".".join(str(p) for p in parts[:2])
    elif err["type"] == "union_tag_invalid":
        msg = f"type {err['ctx']['tag']!r} is not a fault kind: use one of {', '.join(kinds)}"
    elif err["type"] == "union_tag_not_found":
        msg = f"a fault needs `type`: one of {', '.join(kinds)}"
    elif err["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling; `chaos schema` prints every allowed field)"
    elif err["type"] == "missing":
        msg = "required field missing"
    elif not err["type"].startswith("value_error") and "input" in err and not isinstance(err["input"], (dict, list)):
        msg = f"{msg} (got {err['input']!r})"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    # a model-level validator names its field itself (``faults.0.node: ...``): no "(top level)" prefix
    return f"{source}: {loc}: {msg}{more}" if loc else f"{source}: {msg}{more}"


def parse_experiment(data: Any, source: str = "<experiment>") -> Experiment:
    """Validate already-read data (a mapping) as an experiment; one-line UsageError naming ``source``."""
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise UsageError(f"{source}: an experiment is a mapping with at least `name:` (got {got})")
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("kafka_version"), str):
        try:  # ClusterSpec raises it as a UsageError, which pydantic does not locate
            validate_kafka_version(cluster["kafka_version"])
        except UsageError as exc:
            raise UsageError(f"{source}: cluster.kafka_version: {exc}") from None
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_error_line(source, exc)) from None
    except UsageError as exc:  # raised by a validator that knows no file
        raise UsageError(f"{source}: {exc}") from None


#: the catalogue shipped with the package (package data), read from any working directory
PACKAGED_CATALOGUE = Path(__file__).resolve().parent / "catalogue"
#: a project's own catalogue, relative to the working directory: adds to and overrides the packaged one
LOCAL_CATALOGUE = Path("experiments")


def catalogue_path(extra: tuple[Path, ...] | list[Path] = ()) -> list[Path]:
    """The catalogue directories that exist, lowest precedence first: the packaged catalogue,
    ``./experiments``, then ``extra`` (``--dir``); the same directory is listed once."""
    out: list[Path] = []
    seen: set[Path] = set()
    for d in (PACKAGED_CATALOGUE, LOCAL_CATALOGUE, *extra):
        try:
            real = d.resolve()
        except OSError:
            continue
        if d.is_dir() and real not in seen:
            seen.add(real)
            out.append(d)
    return out


def _looks_like_a_path(text: str) -> bool:
    return "/" in text or text.endswith((".yaml", ".yml")) or text.startswith(".")


def experiment_names(extra: tuple[Path, ...] | list[Path] = ()) -> list[str]:
    """Catalogue names (file stems) over :func:`catalogue_path`, for completion and suggestions."""
    return sorted({p.stem for d in catalogue_path(extra) for p in d.glob("*.yaml")})


def resolve_experiment(name_or_path: str | Path, extra: tuple[Path, ...] | list[Path] = ()) -> Path:
    """The file of an experiment given as a path or as a catalogue name (the last catalogue
    directory of :func:`catalogue_path` that has ``NAME.yaml`` wins)."""
    text = str(name_or_path)
    p = Path(name_or_path)
    if p.exists() or _looks_like_a_path(text):
        return p
    for d in reversed(catalogue_path(extra)):
        candidate = d / f"{text}.yaml"
        if candidate.is_file():
            return candidate
    import difflib

    close = difflib.get_close_matches(text, experiment_names(extra), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else "`chaos list` shows the catalogue"
    raise UsageError(f"{text}: no such experiment file or catalogue name; {hint}")


def load_experiment(path: str | Path, extra: tuple[Path, ...] | list[Path] = ()) -> Experiment:
    """Load and validate one experiment, given as a file or a catalogue name; one-line UsageError on
    any problem (the file is read by :func:`chaos.spec_file.read_spec_file`: strict YAML, size cap)."""
    from chaos.spec_file import read_spec_file

    p = resolve_experiment(path, extra)
    return _in_its_directory(parse_experiment(read_spec_file(p), str(p)), p.parent)


def _in_its_directory(exp: Experiment, base: Path) -> Experiment:
    """An experiment file's ``app`` / ``command`` members run in the file's directory: a relative ``cwd`` is
    relative to it and the default is it, so the file runs the same from anywhere."""
    consumers = exp.workload.consumers
    if not any(c.application for c in consumers):
        return exp
    fixed = tuple(c.model_copy(update={"cwd": str((base / (c.cwd or ".")).resolve())}) if c.application else c
                  for c in consumers)
    return exp.model_copy(update={"workload": exp.workload.model_copy(update={"consumers": fixed})})


def json_schema() -> dict[str, Any]:
    """JSON Schema of an experiment file, for editors (``chaos schema``)."""
    schema = Experiment.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kafka-chaos experiment"
    return schema


def catalogue(directory: str | Path | None = None,
              extra: tuple[Path, ...] | list[Path] = ()) -> list[tuple[Path, Experiment | UsageError]]:
    """Every ``*.yaml`` of ``directory`` — or, without one, of the whole :func:`catalogue_path`
    (a file overrides a same-named one of a lower-precedence directory) — loaded, sorted by name.

    An unreadable or invalid file is an entry whose value is its :class:`UsageError`; it never hides
    the other entries.
    """
    dirs = [Path(directory)] if directory is not None else catalogue_path(extra)
    by_name: dict[str, Path] = {}
    for d in dirs:
        try:
            for p in d.glob("*.yaml"):
                by_name[p.stem] = p
        except OSError:
            continue
    out: list[tuple[Path, Experiment | UsageError]] = []
    for _, p in sorted(by_name.items()):
        try:
            out.append((p, load_experiment(p)))
        except UsageError as exc:
            out.append((p, exc))
    return out


def dump_schema(path: Path) -> None:
    """Write :func:`json_schema` to ``path`` (replaced whole, never half-written; no temp file left)."""
    import os
    import tempfile

    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory; give a file name, e.g. {path / 'schema.json'}")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{path}: directory {parent} does not exist; create it or choose another file")
    text = json.dumps(json_schema(), indent=2) + "\n"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write in {parent} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def apply_overrides(exp: Experiment, *, kafka_version: str | None = None, group_protocol: str | None = None,
                    client_versions: Mapping[Client, str] | None = None, flag: str = "--") -> Experiment:
    """``exp`` on another Kafka release and/or group protocol, validated again as a whole.

    Used by ``chaos run --kafka-version/--group-protocol`` and by the pytest plugin's
    ``--chaos-kafka-version/--chaos-group-protocol`` (``flag`` is the prefix of the option names the
    error line cites). The metadata mode follows the release unless the file sets ``cluster.mode``
    (:func:`chaos.model.cluster.modes_of`: 4.x is KRaft only, KIP-833). ``group_protocol`` is set on
    every member: under ``consumer`` (KIP-848) the coordinator assigns, so a member's client-side
    ``assignor`` is reset to its default (it has no meaning there; ``remote_assignor`` is kept); under
    ``classic`` ``remote_assignor`` is dropped. A combination the model refuses (KIP-848 on a ZooKeeper
    cluster, kafka-python under KIP-848, a ZooKeeper target on KRaft, ...) is a one-line UsageError
    naming the experiment and the options.

    ``client_versions`` (``--client-version CLIENT=X.Y.Z``, issue 34) sets ``client_version`` on every member of
    that client, a share group's members included (a ``command`` member brings its own client and is left as it
    is); a release too old for a member's group protocol, or without the share consumer a share member needs, is
    refused the same way.
    """
    from chaos.model.workload import ConsumerSpec, GroupProtocol

    if kafka_version is None and group_protocol is None and not client_versions:
        return exp
    data = exp.model_dump()
    given = []
    if kafka_version is not None:
        data["cluster"]["kafka_version"] = kafka_version
        given.append(f"{flag}kafka-version {kafka_version}")
    if group_protocol is not None:
        protocol = GroupProtocol(group_protocol)
        for member in data["workload"]["consumers"]:
            member["group_protocol"] = protocol
            if protocol is GroupProtocol.CONSUMER:
                member["assignor"] = ConsumerSpec.model_fields["assignor"].default
            else:
                member["remote_assignor"] = None
        given.append(f"{flag}group-protocol {protocol.value}")
    share_members = (data["workload"].get("share") or {}).get("members", [])
    for client, version in (client_versions or {}).items():
        for member in [*data["workload"]["consumers"], *share_members]:
            if member["client"] == client and member.get("command") is None:
                member["client_version"] = version
        given.append(f"{flag}client-version {client.value}={version}")
    return parse_experiment(data, f"{exp.name} with {' '.join(given)}")
