"""`python -m specflux.cli ...`: the same as the `specflux` command."""

from specflux.cli.main import run

run()
