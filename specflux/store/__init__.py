"""The task store: the workspace, config, the TaskStateManager, archiving, chain wiring, lint, history, the list cache."""
