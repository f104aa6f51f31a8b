#!/usr/bin/env bash
# kafka-chaos's own Docker engine (docs/architecture.md, "Environment"); see chaos/cluster/container_engine.py.
#   scripts/docker-engine.sh install              apt-get install docker.io debootstrap when missing
#   scripts/docker-engine.sh start|stop|status    a dockerd on its own socket, data root and exec root
#   scripts/docker-engine.sh run -- CMD ...       engine up, CMD, engine down (exit code of CMD)
# Exit code 3 with one line on stderr: the engine cannot be started here, and why.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec "$PY" -m chaos.cluster.container_engine "$@"
