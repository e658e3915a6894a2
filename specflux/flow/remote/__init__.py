"""Workers on many machines sharing one queue through a git remote (CONTRACT section 8)."""
