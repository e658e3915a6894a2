"""A run's record: its folder, the event log, the state folded from it, the narrative, task holds."""
