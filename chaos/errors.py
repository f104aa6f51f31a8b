"""The one exception type that the CLI turns into a one-line message and exit 2.

Anything a user can fix (bad input, a missing tool, a port in use, a node that
would not start) is raised as :class:`UsageError` with a message that says what
to change. Anything else is a bug and keeps its traceback.
"""


class UsageError(Exception):
    """Bad input or an unusable environment; the message says what to change."""


class InfrastructureError(UsageError):
    """A real component (JVM, proxy, ZooKeeper) failed to start or answer.

    Exits 2 like bad input: the run could not be judged, which is neither a
    pass nor an invariant failure.
    """
