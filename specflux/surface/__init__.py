"""What the surfaces (CLI, MCP server, board, demo) share: JSON shapes and tables of tasks."""
