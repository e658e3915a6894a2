"""Task files from what people already have: spec-kit tasks.md, Backlog.md, Taskmaster, harness files."""
