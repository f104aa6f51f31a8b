"""Bad input gets one line saying what to change, and exit code 2 — never a traceback.

These run the real ``chaos`` executable (and real Maven / Go / JVMs where the
error comes from them).
"""

import os
import socket
import subprocess
import sys

import pytest

CHAOS = [sys.executable, "-m", "chaos.cli"]


def run(args, env=None, timeout=180):
    return subprocess.run(CHAOS + args, capture_output=True, text=True, env=env, timeout=timeout)


def assert_one_line_error(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    # progress lines may precede it; the error is exactly one line, and the last
    errors = [l for l in res.stderr.splitlines() if l.startswith("chaos: error:")]
    assert len(errors) == 1, res.stderr
    assert res.stderr.rstrip().endswith(errors[0])
    for fragment in fragments:
        assert fragment in errors[0]


@pytest.fixture
def state_env(tmp_path):
    return dict(os.environ, KAFKA_CHAOS_STATE=str(tmp_path / "state"))


@pytest.mark.parametrize("args, fragment", [
    (["cluster", "up", "--brokers", "0"], "brokers: Input should be greater than or equal to 1"),
    (["cluster", "up", "--brokers", "2", "--replication-factor", "3"], "exceeds brokers=2"),
    (["cluster", "up", "--kafka-version", "5.0.0"], "unknown Kafka version '5.0.0'"),
    (["cluster", "up", "--kafka-version", "4.4.0", "--mode", "zookeeper"],
     "mode=zookeeper is not possible on Kafka 4.4.0"),
    (["cluster", "up", "--kafka-version", "3.6.2", "--mode", "kraft"], "use 3.7 or later for KRaft"),
    (["cluster", "up", "--kafka-version", "4.4.0", "--controllers", "2"], "a KRaft quorum needs an odd size"),
    (["cluster", "up", "--kafka-version", "4.4.0", "--zookeepers", "3"], "--zookeepers applies to ZooKeeper mode only"),
    (["cluster", "up", "--controllers", "3"], "--controllers applies to KRaft mode only"),
    (["setup", "--kafka-version", "1.0.0"], "unknown Kafka version '1.0.0'"),
    (["cluster", "up", "--override", "nonsense"], "write KEY=VALUE"),
    (["cluster", "up", "--like", "baseline", "--brokers", "1"], "--like baseline gives the cluster's shape: drop --brokers"),
    (["cluster", "up", "--like", "no-such-experiment"], "no-such-experiment"),
    (["run", "baseline", "--cluster", "cluster-of-nobody"], "no running local cluster of this user by that name"),
    (["replay", "nope", "--cluster", "cluster-of-nobody"], "no such run directory"),
])
def test_bad_cluster_input(args, fragment, state_env):
    assert_one_line_error(run(args, env=state_env), fragment)


def test_java_missing(state_env, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = dict(state_env, PATH=str(bindir), JAVA_HOME="")
    assert_one_line_error(run(["cluster", "up"], env=env), "java not found")


def test_port_taken(state_env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert_one_line_error(run(["cluster", "up", "--base-port", str(port)], env=state_env),
                              f"port 127.0.0.1:{port} is already in use")
    finally:
        s.close()


def test_maven_unreachable_is_one_line(tmp_path, state_env):
    # a real Maven whose only repository is a closed loopback port
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>dead</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/</url></mirror></mirrors></settings>")
    env = dict(state_env, MAVEN_OPTS=f"-Duser.home={home}", KAFKA_CHAOS_CACHE=str(tmp_path / "cache"))
    res = run(["setup", "--kafka-version", "3.8.1"], env=env)
    assert_one_line_error(res, "Maven could not resolve Kafka 3.8.1")
    assert not (tmp_path / "cache" / "kafka" / "3.8.1" / ".complete").exists()


def test_go_proxy_unreachable_is_one_line(tmp_path, state_env):
    cache = tmp_path / "cache"
    # every Kafka release `chaos setup` fetches "cached", so only the Toxiproxy build runs
    from chaos.cluster.runtime import cache_root
    from chaos.model.cluster import DEFAULT_KAFKA_VERSION, KRAFT_KAFKA_VERSION
    (cache / "kafka").mkdir(parents=True)
    for version in (DEFAULT_KAFKA_VERSION, KRAFT_KAFKA_VERSION):
        real = cache_root() / "kafka" / version
        if not (real / ".complete").exists():
            pytest.skip("runtime not set up")
        (cache / "kafka" / version).symlink_to(real)
    env = dict(state_env, KAFKA_CHAOS_CACHE=str(cache), GOPROXY="http://127.0.0.1:9", GOSUMDB="off",
               GOFLAGS="", GOPATH=str(tmp_path / "gopath"))
    assert_one_line_error(run(["setup"], env=env), "go could not build Toxiproxy")


@pytest.mark.integration
def test_node_that_fails_to_start_shows_its_log_tail(state_env):
    res = run(["cluster", "up", "--brokers", "1", "--override", "broker.id=notanumber"], env=state_env)
    assert_one_line_error(res, "broker-1 exited with code", "broker.id")


# ---------------------------------------------------------------- every bad input, table-driven
#
# Each case builds its input under tmp_path (cwd), runs the real `chaos`, and asserts: exit 2, exactly
# one `chaos: error:` line (the last on stderr), no traceback, the fragments that locate the problem
# (file, field, what to change), and that nothing was written in tmp_path (no temp file, no .hypothesis/).

ROOT_DIR = __import__("pathlib").Path(__file__).resolve().parents[2]
HISTORY = ROOT_DIR / "fixtures" / "histories" / "delivery-lost-record.jsonl"


def _write(path, data: bytes | str):
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)


def _run_dir(tmp, name="run", history=None):
    d = tmp / name
    _write(d / "history.jsonl", history if history is not None else HISTORY.read_bytes())
    return d


def _setup_dir_as_yaml(tmp):
    (tmp / "some.yaml").mkdir()


def _setup_checks_dir(tmp):
    (_run_dir(tmp) / "checks.json").mkdir()


def _setup_corrupt_history(tmp):
    lines = HISTORY.read_bytes().splitlines()
    lines[3] = lines[3][:15]
    _run_dir(tmp, "runs/exp/run-001", b"\n".join(lines) + b"\n")


CASES = [
    # (id, setup(tmp) or file contents by name, argv, fragments of the one error line)
    ("path-is-directory", _setup_dir_as_yaml, ["plan", "some.yaml"], ["some.yaml: is a directory", ".yaml file"]),
    ("path-is-directory-slash", _setup_dir_as_yaml, ["plan", "some.yaml/"], ["is a directory"]),
    ("not-utf8", {"x.yaml": b"name: caf\xe9\n"}, ["plan", "x.yaml"], ["x.yaml:1: not UTF-8", "save the file as UTF-8"]),
    ("utf16", {"x.yaml": "name: x\n".encode("utf-16")}, ["plan", "x.yaml"], ["x.yaml:1: not UTF-8"]),
    ("deep-flow", {"x.yaml": "x: " + "[" * 20000 + "]" * 20000}, ["plan", "x.yaml"], ["x.yaml:1: nested more than 64"]),
    ("deep-block", {"x.yaml": "".join("  " * i + f"k{i}:\n" for i in range(200))}, ["plan", "x.yaml"],
     ["x.yaml:", "nested more than 64"]),
    ("too-big", {"x.yaml": "name: big\nx: [" + ",".join(["1"] * 600000) + "]\n"}, ["plan", "x.yaml"],
     ["x.yaml:", "1,048,576-byte limit"]),
    ("billion-laughs", {"x.yaml": "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [{','.join(['*' + p] * 10)}]\n" for p, c in zip("abcde", "bcdef", strict=False))},
     ["plan", "x.yaml"], ["x.yaml: its aliases expand to more than"]),
    ("duplicate-key", {"x.yaml": "name: a\nname: b\n"}, ["plan", "x.yaml"], ["x.yaml:2: name: given twice", "line 1"]),
    ("duplicate-nested-key", {"x.yaml": "name: a\nworkload:\n  partitions: 3\n  partitions: 4\n"}, ["plan", "x.yaml"],
     ["x.yaml:4: workload.partitions: given twice (first on line 3)"]),
    ("yes-as-number", {"x.yaml": "name: a\nworkload:\n  partitions: yes\n"}, ["plan", "x.yaml"],
     ["x.yaml:3: workload.partitions: 'yes' is a boolean in YAML 1.1", "write true or false"]),
    ("yes-as-brokers", {"x.yaml": "name: a\ncluster:\n  brokers: yes\n"}, ["plan", "x.yaml"],
     ["x.yaml:3: cluster.brokers: 'yes'"]),
    ("off-in-list", {"x.yaml": "name: a\nfaults:\n  - type: kill\n    target: off\n"}, ["plan", "x.yaml"],
     ["x.yaml:4: faults.0.target: 'off'"]),
    ("sexagesimal", {"x.yaml": "name: a\nruns: 1:30\n"}, ["plan", "x.yaml"],
     ["x.yaml: runs: Input should be a valid integer",
                                                                             "'1:30'"]),
    ("empty-file", {"x.yaml": ""}, ["plan", "x.yaml"], ["x.yaml: an experiment is a mapping", "empty file"]),
    ("list-file", {"x.yaml": "- a\n"}, ["plan", "x.yaml"], ["x.yaml: an experiment is a mapping", "got a list"]),
    ("syntax", {"x.yaml": "name: x\n  bad: [\n"}, ["plan", "x.yaml"], ["x.yaml:2: not valid YAML"]),
    ("unknown-field", {"x.yaml": "name: x\nfoo: 1\n"}, ["plan", "x.yaml"], ["x.yaml: foo: unknown field", "chaos schema"]),
    ("model-error-no-top-level", {"x.yaml": "name: x\nworkload:\n  replication: 5\n"}, ["plan", "x.yaml"],
     ["x.yaml: workload.replication=5 exceeds cluster.brokers=3"]),
    ("kafka-version-in-file", {"x.yaml": "name: x\ncluster:\n  kafka_version: '5.0.0'\n"}, ["plan", "x.yaml"],
     ["x.yaml: cluster.kafka_version: unknown Kafka version '5.0.0'", "3.7.x-4.x (KRaft"]),
    ("kafka-version-option", {}, ["run", "baseline", "--kafka-version", "5.0.0"],
     ["--kafka-version: unknown Kafka version '5.0.0'"]),
    ("unknown-name", {}, ["plan", "baselin"], ["baselin: no such experiment", "did you mean baseline"]),
    ("missing-path", {}, ["plan", "nope/x.yaml"], ["nope/x.yaml: no such experiment file"]),
    ("misspelt-command", {}, ["chek"], ["no such command 'chek'", "did you mean check"]),
    ("unknown-command", {}, ["validate"], ["no such command 'validate' (see `chaos -h`)"]),
    ("unknown-option", {}, ["plan", "baseline", "--sed", "3"], ["No such option '--sed'", "'--seed'", "chaos plan -h"]),
    ("missing-argument", {}, ["plan"], ["Missing argument 'EXPERIMENT'"]),
    ("seed-out-of-range", {}, ["plan", "baseline", "--seed", "-1"], ["--seed -1: a seed is an integer from 0"]),
    ("run-nothing", {}, ["run"], ["name at least one experiment"]),
    ("list-dir-missing", {}, ["list", "--dir", "nope"], ["--dir nope: no such directory"]),
    ("schema-missing-dir", {}, ["schema", "--out", "missing/x.json"], ["missing/x.json: directory missing does not exist"]),
    ("schema-out-is-dir", {"d/keep": ""}, ["schema", "--out", "d"], ["d: is a directory", "d/schema.json"]),
    ("check-missing", {}, ["check", "nope"], ["nope: no such run directory"]),
    ("check-other-file", {"run/header.json": "{}"}, ["check", "run/header.json"],
     ["run/header.json: a file, not a run directory", "history.jsonl"]),
    ("check-checks-json-is-dir", _setup_checks_dir, ["check", "run"],
     ["run/checks.json: is a directory", "remove or rename"]),
    ("check-corrupt-names-run", _setup_corrupt_history, ["check", "runs/exp/run-001"],
     ["runs/exp/run-001: history.jsonl:4: not valid JSON"]),
    ("check-not-utf8-history", {"run/history.jsonl": b"\xff\xfe\n"}, ["check", "run"], ["run: history.jsonl:1:"]),
    ("check-max-evidence-negative", {}, ["check", "x", "--max-evidence", "-1"], ["--max-evidence"]),
    ("cluster-down-unknown", {}, ["cluster", "down", "nosuch"], ["no running cluster 'nosuch' of this user"]),
    # counts that become processes or threads are bounded in the model (chaos.model), the bound in the message
    ("ten-thousand-members", {"x.yaml": "name: x\nworkload:\n  consumers: [" + "{}, " * 10000 + "]\n"}, ["plan", "x.yaml"],
     ["x.yaml: workload.consumers: 10000 members: at most 64 (each is a process of its own)"]),
    ("too-many-producers", {"x.yaml": "name: x\nworkload:\n  producers: [" + "{}, " * 17 + "]\n"}, ["plan", "x.yaml"],
     ["x.yaml: workload.producers: 17 producers: at most 16"]),
    ("too-many-faults", {"x.yaml": "name: x\nphases: {chaos_s: 60}\nfaults:\n" + "  - {type: kill, target: "
                         "random_broker, trigger: {random: {count: 600}}}\n" * 2}, ["plan", "x.yaml"],
     ["x.yaml: faults: 1200 planned faults", "at most 1000"]),
    ("too-many-brokers", {"x.yaml": "name: x\ncluster: {brokers: 10}\n"}, ["plan", "x.yaml"],
     ["x.yaml: cluster.brokers: Input should be less than or equal to 9"]),
    ("too-many-lanes", {}, ["cluster", "up", "--lanes", "17"], ["lanes: Input should be less than or equal to 16"]),
    ("too-many-runs", {}, ["run", "baseline", "--runs", "10001"], ["--runs 10001: at most 10000 runs per experiment"]),
    ("demo-records-zero", {}, ["demo", "--records", "0"], ["--records"]),
    ("rpc-on-zookeeper", {"x.yaml": "name: x\nfaults:\n  - {type: rpc, target: node, node: zk-1, api: Fetch, "
                                    "action: drop_request}\n"}, ["plan", "x.yaml"],
     ["faults.0: zk-1 speaks ZooKeeper's protocol, not Kafka's"]),
    # chaos explore: every refusal before a cluster, nothing written (no archive, no results/)
    ("rpc-on-controller-client-lanes", {"x.yaml": "name: x\ncluster: {kafka_version: 4.4.0}\nfaults:\n"
                                                  "  - {type: rpc, target: controller, api: Fetch, action: drop_request}\n"},
     ["plan", "x.yaml"], ["the controller answers only its brokers, over the quorum links: add links: quorum"]),
    ("explore-budget-too-short", {}, ["explore", "baseline", "--budget", "1s"],
     ["--budget 1s: shorter than the shortest generated run of baseline", "give at least"]),
    ("explore-bad-shard", {}, ["explore", "baseline", "--shard", "3/2"], ["--shard 3/2: K/N needs 1 <= K <= N"]),
    ("explore-shard-not-k-of-n", {}, ["explore", "baseline", "--shard", "two"], ["--shard 'two': write K/N"]),
    ("explore-unknown-family", {}, ["explore", "baseline", "--families", "process,disk"],
     ["--families 'process,disk': no family named disk", "the families are process, link, rpc"]),
    ("explore-used-archive", {"arch/explore.json": "{}"}, ["explore", "baseline", "--out", "arch"],
     ["--out arch: holds an exploration already (explore.json)"]),
    ("explore-out-in-run", {"run/history.jsonl": "{}"}, ["explore", "baseline", "--out", "run/x"],
     ["--out run/x: is inside the recorded run", "never written into"]),
    ("explore-shrink-share", {}, ["explore", "baseline", "--shrink-share", "1.5"], ["--shrink-share 1.5"]),
    ("explore-unknown-workload", {}, ["explore", "nosuch"], ["nosuch"]),
    ("explore-shard-without-seed", {}, ["explore", "baseline", "--shard", "1/2"], ["give every shard the same --seed"]),
    ("nightly-shard-without-seed", {}, ["run", "--nightly", "--shard", "2/3"], ["give every shard the same --seed"]),
    ("shard-without-nightly", {}, ["run", "baseline", "--shard", "1/2", "--seed", "1"], ["add --nightly"]),
    ("explore-without-nightly", {}, ["run", "baseline", "--explore", "baseline"],
     ["--explore interleaves exploration with a nightly: add --nightly, or run `chaos explore baseline`"]),
    ("nightly-explore-share", {}, ["run", "--nightly", "--explore", "baseline", "--explore-share", "1"],
     ["--explore-share 1: a fraction of the budget above 0 and below 1"]),
    ("nightly-explore-unknown-workload", {}, ["run", "--nightly", "--explore", "nosuch"], ["nosuch"]),
]


@pytest.mark.parametrize("setup, argv, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_bad_input_is_one_line_exit_2(setup, argv, fragments, tmp_path, state_env):
    if callable(setup):
        setup(tmp_path)
    else:
        for name, data in setup.items():
            _write(tmp_path / name, data)
    before = {p for p in tmp_path.rglob("*")}
    res = subprocess.run(CHAOS + argv, capture_output=True, text=True, env=state_env, timeout=120, cwd=tmp_path)
    assert_one_line_error(res, *fragments)
    assert "(top level)" not in res.stderr
    line = res.stderr.strip().splitlines()[-1]
    for word in line.split():  # a file is named once, not twice
        if word.endswith((".yaml:", ".yaml")) and len(word) > 6:
            assert line.count(word.rstrip(":")) == 1, line
    left = {p for p in tmp_path.rglob("*")} - before
    assert not left, left  # no temp file, no .hypothesis/, nothing: a refused command writes nowhere


def test_list_keeps_the_other_entries_when_one_file_is_latin1(tmp_path):
    d = tmp_path / "mine"
    _write(d / "good.yaml", "name: good\ndescription: fine\n")
    _write(d / "bad.yaml", b"name: bad\ndescription: caf\xe9\n")
    res = subprocess.run(CHAOS + ["list", "--dir", str(d), "--json"], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    docs = {e["name"]: e for e in __import__("json").loads(res.stdout)}
    assert docs["good"]["valid"] and docs["baseline"]["valid"]  # packaged catalogue still listed
    assert not docs["bad"]["valid"] and "bad.yaml:2: not UTF-8" in docs["bad"]["error"]
    res = subprocess.run(CHAOS + ["list", "--dir", str(d)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0 and "INVALID" in res.stdout and "Traceback" not in res.stderr


def test_check_accepts_a_history_file(tmp_path):
    d = _run_dir(tmp_path)
    res = subprocess.run(CHAOS + ["check", str(d / "history.jsonl")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr  # the fixture loses a record: delivery fails
    assert res.stdout.startswith(f"{d}  run") and (d / "checks.json").exists()


# ---------------------------------------------------------------- the working directory stays empty
@pytest.mark.parametrize("argv", [["replay", "nope"], ["shrink", "nope"], ["run", "baseline", "--kafka-version", "5.0.0"],
                                  ["plan", "baseline"], ["list"], ["check", "nope"]])
def test_a_command_leaves_its_working_directory_empty(argv, tmp_path, state_env):
    """kio imports Hypothesis when it is installed, and Hypothesis cached Unicode tables in ./.hypothesis:
    every command that reached chaos.cluster.wire wrote it into the directory it ran in."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in state_env.items() if not k.startswith("HYPOTHESIS")}
    res = subprocess.run(CHAOS + argv, capture_output=True, text=True, env=env, timeout=120, cwd=cwd)
    assert "Traceback" not in res.stderr, res.stderr
    assert list(cwd.iterdir()) == []


def test_the_wire_module_imports_kio_without_hypothesis(tmp_path):
    code = ("import sys; import chaos.cluster.wire as w; import kio.static._phantom as p; "
            "print('hypothesis' in sys.modules, p.hypothesis is None, w.i32(7) == 7)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.stdout.split() == ["False", "True", "True"], res.stderr
    # a process that imported Hypothesis itself (a test session) keeps it, and kio's strategies with it
    code = "import hypothesis, sys; import chaos.cluster.wire; print('hypothesis' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=dict(os.environ, HYPOTHESIS_STORAGE_DIRECTORY=str(tmp_path / "hyp")))
    assert res.stdout.split() == ["True"], res.stderr
