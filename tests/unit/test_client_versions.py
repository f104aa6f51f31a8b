"""Client library releases as a dimension (issue 34): what the model refuses at load time, what the options
override, which releases a run prepares, and the one-line refusals of the real ``chaos`` executable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from chaos.errors import UsageError
from chaos.experiment import apply_overrides, parse_experiment
from chaos.model.workload import Client, ConsumerSpec, parse_client_release
from chaos.workload.libraries import ClientLibrary, python_env, releases_of

CHAOS = [sys.executable, "-m", "chaos.cli"]
pytest_plugins = ["pytester"]


def _reason(exc: ValidationError) -> str:
    return str(exc).split("Value error, ", 1)[1].split(" [type=", 1)[0]


@pytest.mark.parametrize("fields, reason", [
    ({"client_version": "2.12"}, "client_version '2.12' is not a release number X.Y.Z"),
    ({"client_version": "latest"}, "is not a release number"),
    ({"client_version": "1.9.2"}, "confluent-kafka 1.9.2 is older than 2.0.0"),
    ({"client": "kafka-python", "client_version": "1.4.7"}, "kafka-python 1.4.7 is older than 2.0.0"),
    ({"client": "java", "client_version": "2.7.0"}, "java 2.7.0 is older than 2.8.0"),
    ({"client_version": "2.11.0", "group_protocol": "consumer"},
     "confluent-kafka 2.11.0 has no generally available KIP-848 consumer protocol (from 2.12.0)"),
    ({"client": "java", "client_version": "3.9.1", "group_protocol": "consumer"},
     "java 3.9.1 has no generally available KIP-848 consumer protocol (from 4.0.0)"),
    ({"command": ["my-consumer"], "client_version": "2.12.0"}, "client_version does not apply to a command member"),
    ({"client": "kafka-python", "client_version": "2.3.3", "request_timeout_ms": 6000},
     "kafka-python 2.3.3 needs request_timeout_ms above session_timeout_ms (6000)"),
    ({"client": "kafka-python", "client_version": "2.0.1", "assignor": "sticky"},
     "kafka-python 2.0.1 has no sticky assignor (from 2.0.2)"),
])
def test_a_release_the_worker_cannot_run_is_refused_at_load_time(fields, reason):
    with pytest.raises(ValidationError) as exc:
        ConsumerSpec.model_validate(fields)
    assert reason in _reason(exc.value)


@pytest.mark.parametrize("fields", [
    {"client_version": "2.12.0", "group_protocol": "consumer"},  # the first GA KIP-848 librdkafka
    {"client_version": "2.0.2"},  # classic: the 2.x line
    {"client": "java", "client_version": "4.0.0", "group_protocol": "consumer"},
    {"client": "java", "client_version": "2.8.0"},
    {"client": "kafka-python", "client_version": "2.2.15"},
    {"client": "kafka-python", "client_version": "2.0.2", "assignor": "sticky", "request_timeout_ms": 6001},
    {"client": "kafka-python", "client_version": "3.0.12", "request_timeout_ms": 6000},
    {"app": "my_service.main:run", "client_version": "2.14.0"},  # an app member's instrumented confluent_kafka
])
def test_near_misses_load(fields):
    assert ConsumerSpec.model_validate(fields).client_version == fields["client_version"]


@pytest.mark.parametrize("text, expected", [
    ("confluent-kafka=2.14.0", (Client.CONFLUENT_KAFKA, "2.14.0")),
    ("java==4.2.0", (Client.JAVA, "4.2.0")),  # pip's spelling, as chaos setup --client takes it
    (" kafka-python = 3.0.12", (Client.KAFKA_PYTHON, "3.0.12")),
])
def test_client_release_options_parse(text, expected):
    assert parse_client_release(text) == expected


@pytest.mark.parametrize("text, reason", [
    ("confluent-kafka", "write CLIENT=X.Y.Z"),
    ("librdkafka=2.12.0", "unknown client 'librdkafka'; use one of confluent-kafka, kafka-python, java"),
    ("java=4.1", "is not a release number"),
    ("confluent-kafka=1.9.2", "older than 2.0.0"),
])
def test_bad_client_release_options_say_what_to_write(text, reason):
    with pytest.raises(ValueError) as exc:
        parse_client_release(text)
    assert reason in str(exc.value)


def _experiment(**extra):
    data = {"name": "versions", "cluster": {"kafka_version": "4.4.0"},
            "workload": {"consumers": [{"lane": "lane0"}, {"client": "java", "lane": "lane0"},
                                       {"command": ["app"], "lane": "lane0"}]}}
    data.update(extra)
    return parse_experiment(data, "versions")


def test_an_override_sets_every_member_of_that_client_but_not_a_command_member():
    exp = apply_overrides(_experiment(), client_versions={Client.JAVA: "4.1.0", Client.CONFLUENT_KAFKA: "2.14.0"})
    assert [c.client_version for c in exp.workload.consumers] == ["2.14.0", "4.1.0", None]
    assert releases_of(exp) == {(Client.CONFLUENT_KAFKA, "2.14.0"), (Client.JAVA, "4.1.0")}


def test_an_override_sets_a_share_groups_members_too():
    data = {"name": "queue", "cluster": {"kafka_version": "4.4.0"},
            "workload": {"consumers": [], "share": {"members": [{"lane": "lane0"}, {"client": "java",
                                                                                   "lane": "lane0"}]}}}
    exp = apply_overrides(parse_experiment(data, "queue"),
                          client_versions={Client.JAVA: "4.2.2", Client.CONFLUENT_KAFKA: "2.15.0"})
    assert exp.workload.share is not None
    assert [m.client_version for m in exp.workload.share.members] == ["2.15.0", "4.2.2"]
    assert releases_of(exp) == {(Client.CONFLUENT_KAFKA, "2.15.0"), (Client.JAVA, "4.2.2")}
    with pytest.raises(UsageError) as exc:
        apply_overrides(parse_experiment(data, "queue"), client_versions={Client.CONFLUENT_KAFKA: "2.14.0"})
    assert "--client-version confluent-kafka=2.14.0" in str(exc.value) and "has no ShareConsumer" in str(exc.value)


def test_an_override_too_old_for_the_protocol_names_the_options():
    with pytest.raises(UsageError) as exc:
        apply_overrides(_experiment(), group_protocol="consumer", client_versions={Client.JAVA: "3.9.1"})
    assert "--group-protocol consumer --client-version java=3.9.1" in str(exc.value)
    assert "java 3.9.1 has no generally available KIP-848 consumer protocol" in str(exc.value)


def test_the_releases_a_run_prepares_include_those_its_upgrades_move_members_to():
    exp = _experiment(faults=[{"type": "client_upgrade", "target": "member", "node": "consumer-1",
                               "client_version": "4.2.0", "trigger": {"at_s": 1}, "duration_s": 2}])
    assert releases_of(exp) == {(Client.JAVA, "4.2.0")}
    assert exp.faults[0].upgraded(exp.workload.consumers[1]).client_version == "4.2.0"


@pytest.mark.parametrize("fault, reason", [
    ({"target": "member", "node": "consumer-2", "client_version": "2.14.0"}, "a command member brings its own client"),
    ({"target": "member", "node": "consumer-0", "client_version": None}, "runs confluent-kafka default already"),
    ({"target": "random_member", "client_version": "2.14.0"}, "one release is of one client: target a member by name"),
    ({"target": "member", "node": "consumer-1", "client_version": "2.1.0"}, "java 2.1.0 is older than 2.8.0"),
    ({"target": "coordinator", "client_version": "2.14.0"}, "client_upgrade applies to one member"),
])
def test_an_upgrade_the_member_cannot_take_is_refused(fault, reason):
    with pytest.raises(UsageError) as exc:
        _experiment(faults=[{"type": "client_upgrade", "trigger": {"at_s": 1}, "duration_s": 2, **fault}])
    assert reason in str(exc.value)


def test_a_python_release_goes_first_on_the_worker_path(tmp_path):
    lib = ClientLibrary(Client.CONFLUENT_KAFKA, "2.12.0", tmp_path / "2.12.0", {})
    env = python_env(lib, {"PYTHONPATH": "/a:/b", "HOME": "/h"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "2.12.0" / "site"), "/a", "/b"]
    assert env["HOME"] == "/h"


def _one_line_exit_2(res: subprocess.CompletedProcess, fragment: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1 and fragment in errors[0], res.stderr


@pytest.mark.parametrize("args, fragment", [
    (["run", "baseline", "--client-version", "confluent-kafka=1.9.2"], "older than 2.0.0"),
    (["run", "baseline", "--client-version", "java=4.1.0", "--client-version", "java=4.2.0"],
     "names java twice (4.1.0, 4.2.0)"),
    (["setup", "--client", "rdkafka==2.12.0"], "unknown client 'rdkafka'"),
])
def test_the_cli_refuses_a_bad_release_in_one_line(args, fragment, tmp_path):
    res = subprocess.run(CHAOS + [*args] + (["--out", str(tmp_path / "runs")] if args[0] == "run" else []),
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "KAFKA_CHAOS_STATE": str(tmp_path / "state")})
    _one_line_exit_2(res, fragment)
    assert not (tmp_path / "runs").exists()


def test_a_release_pypi_does_not_have_is_refused_before_any_cluster(tmp_path):
    """A real PyPI answer: the release does not exist; nothing is started, nothing written under --out."""
    cache = tmp_path / "cache"
    res = subprocess.run(CHAOS + ["run", "baseline", "--client-version", "confluent-kafka=2.11.9",
                                  "--out", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=180, cwd=tmp_path,
                         env={**os.environ, "KAFKA_CHAOS_STATE": str(tmp_path / "state"),
                              "KAFKA_CHAOS_CACHE": str(cache)})
    _one_line_exit_2(res, "confluent-kafka 2.11.9 does not exist on PyPI: choose one of")
    assert not (tmp_path / "runs").exists()
    assert not (cache / "clients" / "confluent-kafka" / "2.11.9").exists()
    assert list((cache / "clients" / "confluent-kafka").iterdir()) == []  # no half-prepared entry left


# ------------------------------------------------------------------ the pytest plugin

PLUGIN_TEST = """
from chaos.experiment import load_experiment
from chaos.pytest_plugin import experiment_on


def test_versions(chaos_settings):
    exp = experiment_on(load_experiment("mixed-client-versions"), chaos_settings)
    print("VERSIONS", [c.client_version for c in exp.workload.consumers])
"""


def test_the_plugin_option_moves_every_member_of_that_client(pytester: pytest.Pytester):
    pytester.makepyfile(test_v=PLUGIN_TEST)
    res = pytester.runpytest("-p", "no:cacheprovider", "-s", "--chaos-client-version", "java=4.2.0",
                             "--chaos-client-version", "confluent-kafka=2.13.0")
    res.assert_outcomes(passed=1)
    assert "VERSIONS ['2.13.0', '2.13.0', '2.13.0', '4.2.0', '4.2.0']" in res.stdout.str()
    pytester.makeini("[pytest]\nchaos_client_versions =\n    java=4.1.0\n")
    res = pytester.runpytest("-p", "no:cacheprovider", "-s")
    assert "VERSIONS ['2.12.0', '2.14.0', None, '4.1.0', '4.1.0']" in res.stdout.str()


def test_the_plugin_refuses_a_bad_release_before_any_test(pytester: pytest.Pytester):
    pytester.makepyfile(test_v=PLUGIN_TEST)
    res = pytester.runpytest("-p", "no:cacheprovider", "--chaos-client-version", "java=2.0.0")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--chaos-client-version java 2.0.0 is older than 2.8.0" in res.stderr.str()
