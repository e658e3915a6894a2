"""What every floor may use: errors, exact and atomic file writes, crash points, terminal escapes and colour, Ctrl-C."""
