"""Process faults: a node's or a member's process killed, stopped cleanly, paused, restarted, or a member bounced."""

from __future__ import annotations

from typing import ClassVar, Literal

from chaos.model.fault_traits import FaultTrait
from chaos.model.faults.base import ANY_PROCESS, Family, FaultSpec
from chaos.model.target import MEMBER_ROLES, Role

#: the target's process is stopped or gone until the heal
_OUT = frozenset({FaultTrait.TAKES_TARGET_OUT})


class _ProcessFault(FaultSpec):
    family: ClassVar[Family] = "process"
    targets: ClassVar[frozenset[Role]] = ANY_PROCESS
    traits: ClassVar[frozenset[FaultTrait]] = _OUT


class Kill(_ProcessFault):
    type: Literal["kill"]
    summary: ClassVar[str] = "SIGKILL (restart after duration_s)"


class Terminate(_ProcessFault):
    type: Literal["terminate"]
    summary: ClassVar[str] = "SIGTERM: clean shutdown (restart after duration_s)"


class Pause(_ProcessFault):
    type: Literal["pause"]
    summary: ClassVar[str] = "SIGSTOP (SIGCONT after duration_s)"


class Restart(_ProcessFault):
    """Not ``takes_target_out``: the process is started again at once, not at the heal."""

    type: Literal["restart"]
    summary: ClassVar[str] = "SIGKILL and start again at once"
    traits: ClassVar[frozenset[FaultTrait]] = frozenset()


class Bounce(_ProcessFault):
    type: Literal["bounce"]
    summary: ClassVar[str] = "a member leaves cleanly and rejoins after duration_s (provokes rebalances)"
    targets: ClassVar[frozenset[Role]] = MEMBER_ROLES
    target_error: ClassVar[str | None] = "bounce applies to members: use target member, group_leader, random_member"
