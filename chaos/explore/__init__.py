"""``chaos explore``: a seeded, coverage-steered search for violations nobody wrote an experiment for
(:mod:`chaos.explore.plan` builds the runs, :mod:`chaos.explore.search` runs, replays, shrinks and files
them; docs/explore.md)."""
