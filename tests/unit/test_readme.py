"""README's command-line examples run as written (the cluster-free ones), so the README cannot rot."""

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- cli-example -->", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines() if line.strip()]


def test_readme_cli_examples_run(tmp_path):
    commands = readme_commands()
    assert commands and all(c.startswith("chaos ") for c in commands)
    for command in commands:
        args = [a.replace("/tmp/", f"{tmp_path}/") for a in shlex.split(command)[1:]]
        argv = [sys.executable, "-m", "chaos.cli", *args]
        res = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert res.returncode == 0, (command, res.stderr)
        assert "Traceback" not in res.stderr
