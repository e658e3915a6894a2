"""The board: one self-contained HTML page of the tasks and runs, written or served."""
