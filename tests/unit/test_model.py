"""The model layer is pure: importing it (and building an experiment) loads nothing that talks to a cluster."""

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter (so ``sys.modules`` shows what it alone imported); it must succeed."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out


RUNTIME = ("confluent_kafka", "kafka", "psutil", "docker", "pyspark", "requests", "testcontainers", "orjson")


def test_importing_the_model_loads_no_runtime_library():
    code = ("import sys\n"
            "import chaos.model.experiment, chaos.model.workload, chaos.model.target, chaos.model.cluster\n"
            "from chaos.model import Experiment, ClusterSpec\n"
            "Experiment.model_validate({'name': 'x', 'faults': [{'type': 'pause', 'target': 'random_member',"
            " 'trigger': {'at_s': 1}}]})\n"
            # KRaft and KIP-848 are model too: a 4.x cluster, consumer-protocol members, a controller fault
            "Experiment.model_validate({'name': 'k', 'cluster': {'kafka_version': '4.4.0', 'controllers': 3},"
            " 'workload': {'consumers': [{'group_protocol': 'consumer', 'remote_assignor': 'uniform'}]},"
            " 'faults': [{'type': 'kill', 'target': 'active_controller', 'trigger': {'at_s': 1}}]})\n"
            f"print(','.join(m for m in {RUNTIME!r} if m in sys.modules))\n")
    out = _python(code)
    assert out.stdout.strip() == "", f"the model imported: {out.stdout.strip()}"


def test_the_model_imports_nothing_of_the_clusters_the_checkers_or_the_nemesis():
    """The fault kinds' declarations, what a backend can do, what a fault does and the checkers' names are the
    model's own (issue 32): building experiments, faults and checker selections loads nothing above the model."""
    code = ("import sys\n"
            "from chaos.model import Experiment\n"
            "Experiment.model_validate({'name': 'x', 'backend': 'docker', 'checkers': {'skip': ['assignor']},"
            " 'faults': [{'type': 'disconnect', 'target': 'coordinator', 'trigger': {'at_s': 1}}]})"
            ".required_capabilities()\n"
            "above = ('chaos.cluster', 'chaos.checkers', 'chaos.nemesis')\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith(above))))\n")
    out = _python(code)
    assert out.stdout.strip() == "", f"the model imported: {out.stdout.strip()}"


def test_the_plan_and_schema_commands_need_no_kafka_client():
    code = ("import sys\n"
            "from chaos.experiment import json_schema, load_experiment\n"
            "from chaos.nemesis.schedule import plan\n"
            "json_schema(); plan(load_experiment('baseline'), 1)\n"
            "print(','.join(m for m in ('confluent_kafka', 'kafka', 'psutil', 'docker', 'pyspark') if m in sys.modules))\n")
    out = _python(code)
    assert out.stdout.strip() == "", out.stdout


def test_the_python_api_imports_from_the_package_and_import_chaos_loads_none_of_it():
    """``from chaos import Run, load_experiment`` (chaos.lifecycle's example); the names load on first use."""
    code = ("import sys\n"
            "import chaos\n"
            "light = [m for m in ('chaos.lifecycle', 'chaos.cluster.local', 'chaos.model.experiment')"
            " if m in sys.modules]\n"
            "from chaos import Run, load_experiment, Experiment, FaultSpec, ClusterSpec, LocalCluster\n"
            "from chaos.lifecycle import Run as R\n"
            "assert Run is R and load_experiment('baseline').name == 'baseline'\n"
            "try:\n"
            "    chaos.NoSuchThing\n"
            "except AttributeError as e:\n"
            "    print(light, e)\n")
    out = _python(code)
    assert out.stdout.strip() == "[] module 'chaos' has no attribute 'NoSuchThing'", out.stdout
