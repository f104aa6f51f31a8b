"""Repository-wide pytest configuration.

The kafka-chaos pytest plugin is loaded through its ``pytest11`` entry point
(installed with the package); nothing else is needed here. Integration tests
live in ``tests/integration`` and are marked ``integration`` there.
"""
