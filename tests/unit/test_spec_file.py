"""The strict YAML reader of experiment files (chaos.spec_file): YAML 1.2 core scalars, refusals with
their line and field, and the catalogue read exactly as before."""

from __future__ import annotations

import pytest
import yaml

from chaos.errors import UsageError
from chaos.experiment import PACKAGED_CATALOGUE
from chaos.spec_file import MAX_SPEC_BYTES, parse_text, read_spec_file


@pytest.mark.parametrize("path", sorted(PACKAGED_CATALOGUE.rglob("*.yaml")), ids=lambda p: p.name)
def test_the_catalogue_reads_as_safe_load_read_it(path):
    assert read_spec_file(path) == yaml.safe_load(path.read_text())


@pytest.mark.parametrize("text, value", [
    ("v: true", True), ("v: False", False), ("v: 12", 12), ("v: -3", -3), ("v: 0x10", 16), ("v: 0o17", 15),
    ("v: 1.5", 1.5), ("v: 1e3", 1000.0), ("v: .inf", float("inf")), ("v: ~", None), ("v: null", None),
    ("v:", None), ("v: 'yes'", "yes"), ('v: "off"', "off"),
    # YAML 1.1 readings that YAML 1.2 does not make: they stay strings, validation names the field
    ("v: 1:30", "1:30"), ("v: 2024-01-01", "2024-01-01"), ("v: 1_000", "1_000"), ("v: 017", 17),
])
def test_core_schema_scalars(text, value):
    assert parse_text(text, "t.yaml") == {"v": value}


@pytest.mark.parametrize("text, fragment", [
    ("a:\n  b: yes\n", "t.yaml:2: a.b: 'yes' is a boolean in YAML 1.1"),
    ("a: [1, On]\n", "t.yaml:1: a.1: 'On'"),
    ("a: 1\nb: 2\na: 3\n", "t.yaml:3: a: given twice (first on line 1)"),
    ("a: [" * 70 + "]" * 70, "nested more than 64 levels"),
    ("a: &x [1, 2]\nb: *y\n", "t.yaml:2: not valid YAML (found undefined alias"),
    ("a: !!python/object:os.system x\n", "t.yaml:1: not valid YAML (could not determine a constructor"),
])
def test_refusals_name_the_line_and_field(text, fragment):
    with pytest.raises(UsageError) as exc:
        parse_text(text, "t.yaml")
    assert fragment in str(exc.value)


def test_aliases_within_bounds_still_work():
    assert parse_text("a: &x {k: 1}\nb: *x\n", "t.yaml") == {"a": {"k": 1}, "b": {"k": 1}}


def test_size_is_refused_before_reading(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_bytes(b"#" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(UsageError, match="1,048,576-byte limit"):
        read_spec_file(p)
    p.write_bytes(b"name: x\n" + b"#" * (MAX_SPEC_BYTES - 8))  # exactly at the limit: read
    assert read_spec_file(p) == {"name": "x"}


def test_a_bom_is_accepted(tmp_path):
    p = tmp_path / "bom.yaml"
    p.write_bytes("\ufeffname: x\n".encode())
    assert read_spec_file(p) == {"name": "x"}
