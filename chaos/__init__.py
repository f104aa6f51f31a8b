"""kafka-chaos: break real Kafka consumer groups on purpose and judge, from a
recorded history, whether the group kept its promises."""

from typing import Any

__version__ = "0.1.0"

#: the Python API's entry points, importable as ``from chaos import Run, load_experiment`` (chaos.lifecycle's
#: example); loaded on first use (PEP 562), so ``import chaos`` (every CLI start, every worker) loads none of them
_EXPORTS = {
    "Run": "chaos.lifecycle",
    "load_experiment": "chaos.experiment",
    "Experiment": "chaos.model.experiment",
    "FaultSpec": "chaos.model.faults",
    "ClusterSpec": "chaos.model.cluster",
    "LocalCluster": "chaos.cluster.local",
}
__all__ = ["__version__", "source_commit", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'chaos' has no attribute {name!r}")


def source_commit() -> str | None:
    """The git commit of this kafka-chaos checkout, ``+dirty`` when its tracked files differ from it,
    or None when the package does not run from a git checkout (e.g. installed from a wheel).

    Recorded in each run's header so the report can tell "the same experiment on the same commit
    both passed and failed" (flaky) from a change of code between runs.
    """
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "chaos"],
                               capture_output=True, timeout=10).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")
