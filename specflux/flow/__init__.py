"""Workflow runs: a queue of tasks through agent roles (planner, coder, validate, reviewer, a
human), driven by pluggable decision logic, with every step in an append-only event log.

Nothing below this package imports it (store, agent, chain know nothing of runs).
"""
