"""kafka-chaos: break real Kafka consumer groups on purpose and judge, from a
recorded history, whether the group kept its promises."""

__version__ = "0.1.0"


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
