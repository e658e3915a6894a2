"""A workflow: the file read and checked, its edges, conditions and their tests, the limits of a run."""
