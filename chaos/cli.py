"""The ``chaos`` command line.

click is the CLI framework (well kept, composable groups); every command turns
:class:`chaos.errors.UsageError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import click

from chaos.errors import UsageError


class _Group(click.Group):
    """A click group that maps UsageError to a one-line message and exit 2."""

    def invoke(self, ctx: click.Context):  # noqa: D401 - click hook
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            click.echo(f"chaos: error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(package_name="kafka-chaos")
def main() -> None:
    """Chaos and fault-injection testing for Kafka consumer groups."""


if __name__ == "__main__":  # pragma: no cover
    main()
