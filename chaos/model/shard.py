"""Splitting a seeded plan over machines: shard K of N runs the plan's indices i with i % N == K - 1.

A plan (``chaos explore``'s generated runs, ``chaos run --nightly``'s rounds of the catalogue) is a sequence
decided by its seed alone, so N machines given the same seed and shards 1/N … N/N together run exactly the
runs one machine would, each run once; a CI matrix is the distributed engine (docs/explore.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from chaos.errors import UsageError

#: the most shards a plan is split into
MAX_SHARDS = 1000


@dataclass(frozen=True)
class Shard:
    """Shard ``k`` of ``n`` (1-based): the plan indices ``i`` with ``i % n == k - 1``."""

    k: int = 1
    n: int = 1

    @classmethod
    def parse(cls, text: str | None) -> Shard:
        """``"K/N"`` (1 <= K <= N <= :data:`MAX_SHARDS`), or the whole plan for None; a UsageError saying what to write."""
        if text is None:
            return cls()
        try:
            k, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise UsageError(f"--shard {text!r}: write K/N, e.g. 2/4 for the second of four shards") from None
        if not 1 <= k <= n <= MAX_SHARDS:
            raise UsageError(f"--shard {text}: K/N needs 1 <= K <= N <= {MAX_SHARDS} (e.g. 1/{max(n, 2)})")
        return cls(k, n)

    def owns(self, index: int) -> bool:
        return index % self.n == self.k - 1

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    @property
    def suffix(self) -> str:
        """What a shard's archive and summary names end with (``-shard-K-of-N``; nothing for the whole plan), so
        the archives of N machines never share a name."""
        return f"-shard-{self.k}-of-{self.n}" if self.n > 1 else ""


#: the whole plan, one shard
WHOLE = Shard()
