"""The offline walk-through (`specflux demo`), its recorded sessions and its workflow runs."""
