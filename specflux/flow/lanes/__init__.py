"""Parallel lanes: worktrees, the engine that runs tasks side by side and merges them, kept branches."""
