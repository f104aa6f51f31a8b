"""Experiment files on disk, read strictly: what a YAML file may say and how big it may be.

PyYAML's ``safe_load`` reads YAML 1.1, which is too loose for a file that
decides what a chaos run does:

* ``yes``/``no``/``on``/``off`` are booleans, and a boolean is an ``int`` to
  Python, so ``partitions: yes`` silently became 1 partition;
* a key given twice is accepted and the last one wins;
* ``1:30`` is the integer 90 (base 60), ``2024-01-01`` a date;
* nothing bounds the size or the nesting: a 3 MB list took 721 MB and 19 s,
  and ``[`` nested 20,000 deep overflows the recursion of the composer.

The loader here keeps PyYAML's parser (a well-kept library; the rules below
are small hooks on its resolver, composer and constructor, not a parser of our
own) and narrows it to the YAML 1.2 core schema:

* booleans are ``true``/``false`` only (any case, as YAML 1.2 core); a plain
  ``yes``/``no``/``on``/``off`` is *refused* with its line, because pydantic
  would turn the string back into a boolean (or reject it far from the file)
  — quote it to mean the word;
* integers are decimal, ``0o`` octal or ``0x`` hex; floats as YAML 1.2
  (``.inf``, ``.nan``); anything else (``1:30``, ``2024-01-01``, ``1_000``)
  stays a string, and the experiment's validation names the field;
* a duplicate key is refused with both lines;
* files larger than :data:`MAX_SPEC_BYTES` (1 MiB; catalogue files are a few
  KiB) are refused before parsing, nesting deeper than :data:`MAX_DEPTH` while
  composing, and anchors/aliases that expand past :data:`MAX_NODES` nodes
  (the "billion laughs") before anything walks the expanded tree;
* the file must be UTF-8 (YAML 1.2 §5.2 allows UTF-16/32 too, but only with a
  BOM; we read what editors write).

Every refusal is a :class:`chaos.errors.UsageError` whose message starts with
``FILE:LINE:`` and says what to change.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from chaos.errors import UsageError

#: the largest experiment file read (bytes); checked with stat() before reading
MAX_SPEC_BYTES = 1024 * 1024
#: the deepest nesting of mappings/sequences (the catalogue needs 5)
MAX_DEPTH = 64
#: the most nodes a document may expand to through aliases
MAX_NODES = 200_000

#: YAML 1.1 booleans that YAML 1.2 reads as strings: refused unquoted (see module doc)
_AMBIGUOUS_BOOLEANS = re.compile(r"^(?:yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N)$")


class _CoreResolver(BaseResolver):
    """The YAML 1.2 core schema's implicit tags (https://yaml.org/spec/1.2.2/#1032-tag-resolution)."""


_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))
_CoreResolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])


class _BoundedComposer(Composer):
    """Refuses nesting deeper than MAX_DEPTH (the composer recurses once per level)."""

    _depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML hook
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise UsageError(f"{self.name}:{mark.line + 1}: nested more than {MAX_DEPTH} levels deep; "
                                 "an experiment needs 5")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _StrictConstructor(SafeConstructor):
    """SafeConstructor with the core-schema resolver above; the checks are in :func:`_check_tree`."""

    def construct_yaml_int(self, node):  # noqa: ANN001 - PyYAML hook
        """YAML 1.2 core integers: ``017`` is seventeen (YAML 1.1 read it as octal 15)."""
        text = str(self.construct_scalar(node))
        sign = -1 if text.startswith("-") else 1
        body = text.lstrip("+-")
        if body.startswith("0o"):
            return sign * int(body[2:], 8)
        if body.startswith("0x"):
            return sign * int(body[2:], 16)
        return sign * int(body, 10)


# types-PyYAML types a constructor hook as taking a Loader; PyYAML calls it with the constructor instance
_StrictConstructor.add_constructor("tag:yaml.org,2002:int", _StrictConstructor.construct_yaml_int)  # type: ignore[type-var]


class _StrictLoader(Reader, Scanner, Parser, _BoundedComposer, _StrictConstructor, _CoreResolver):
    def __init__(self, stream: str, name: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _StrictConstructor.__init__(self)
        _CoreResolver.__init__(self)
        self.name = name


def _expanded_size(root: Node, limit: int) -> int:
    """Nodes of ``root`` with every alias expanded, counted without expanding (memoised per node)."""
    memo: dict[int, int] = {}
    # children before parents, iteratively
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo:
            continue
        if done:
            if isinstance(node, SequenceNode):
                memo[id(node)] = 1 + sum(memo[id(c)] for c in node.value)
            elif isinstance(node, MappingNode):
                memo[id(node)] = 1 + sum(memo[id(k)] + memo[id(v)] for k, v in node.value)
            else:
                memo[id(node)] = 1
            if memo[id(node)] > limit:
                return memo[id(node)]
            continue
        stack.append((node, True))
        if isinstance(node, SequenceNode):
            stack.extend((c, False) for c in node.value if id(c) not in memo)
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                stack.extend((n, False) for n in (k, v) if id(n) not in memo)
    return memo[id(root)]


def _check_tree(root: Node, name: str) -> None:
    """Refuse duplicate keys and unquoted YAML 1.1 booleans, naming the line and the field."""
    seen_nodes: set[int] = set()
    stack: list[tuple[Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:  # an alias: checked where it was anchored
            continue
        seen_nodes.add(id(node))
        where = f"{path}: " if path else ""
        if isinstance(node, ScalarNode):
            if node.tag == "tag:yaml.org,2002:str" and node.style is None and _AMBIGUOUS_BOOLEANS.match(node.value):
                raise UsageError(f"{name}:{node.start_mark.line + 1}: {where}{node.value!r} is a boolean in YAML 1.1 "
                                 f"but a string here (YAML 1.2); write true or false, a number, or quote it "
                                 f"(\"{node.value}\") if you mean the word")
        elif isinstance(node, SequenceNode):
            stack.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(node.value))
        elif isinstance(node, MappingNode):
            keys: dict[str, Node] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, ScalarNode) else "<complex key>"
                if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    if key in keys:
                        raise UsageError(f"{name}:{key_node.start_mark.line + 1}: {path + '.' if path else ''}{key}: "
                                         f"given twice (first on line {keys[key].start_mark.line + 1}); keep one")
                    keys[key] = key_node
                stack.append((value_node, f"{path}.{key}" if path else key))


def parse_text(text: str, name: str) -> Any:
    """The data of one YAML document, read strictly (see module doc); ``name`` prefixes every error."""
    loader = _StrictLoader(text, name)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if not isinstance(node, ScalarNode) and _expanded_size(node, MAX_NODES) > MAX_NODES:
            raise UsageError(f"{name}: its aliases expand to more than {MAX_NODES:,} nodes; "
                             "write the repeated parts out or use fewer aliases")
        _check_tree(node, name)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "unreadable"
        raise UsageError(f"{name}{where}: not valid YAML ({problem})") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{name}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except (ValueError, TypeError) as exc:  # an explicit tag on a scalar it does not fit (`!!int abc`)
        raise UsageError(f"{name}: not valid YAML ({exc})") from None
    finally:
        loader.dispose()


def read_spec_file(path: Path) -> Any:
    """The data of the YAML file at ``path``: a regular UTF-8 file of at most MAX_SPEC_BYTES, read strictly."""
    try:
        if path.is_dir():
            raise UsageError(f"{path}: is a directory; name an experiment .yaml file "
                             f"(or pass the directory to `chaos list --dir`)")
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise UsageError(f"{path}: {size:,} bytes, more than the {MAX_SPEC_BYTES:,}-byte limit of an "
                             "experiment file (catalogue files are a few KiB); split it or trim it")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such experiment file (see `chaos list`)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_SPEC_BYTES:  # grew since stat()
        raise UsageError(f"{path}: more than the {MAX_SPEC_BYTES:,}-byte limit of an experiment file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                         "save the file as UTF-8") from None
    return parse_text(text.removeprefix("\ufeff"), str(path))
