"""Whether the user pressed Ctrl-C in this process: a command that records the interruption and
returns normally (a workflow run pauses) still exits 130, as the shell expects of Ctrl-C."""

pressed = False
