"""Checkers: pure functions of a history that judge the invariants (docs/architecture.md, "Invariants").

Names are imported lazily: ``chaos.checkers.result`` (the verdict records) can be imported without loading
the history reader or any checker. The checkers' names are the model's (``chaos.model.checker_name``).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CheckerBounds": "bounds", "ResolvedBounds": "bounds",
    "Finding": "result", "Result": "result", "Validity": "result", "Verdict": "result",
    "merge_validity": "result", "run_checkers": "registry", "judge_run": "judge",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'chaos.checkers' has no attribute {name!r}")
    return getattr(importlib.import_module(f"chaos.checkers.{_WHERE[name]}"), name)
