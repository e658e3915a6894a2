"""What one step of a run does: the roles, validate, the evidence, the branch guard, settling tasks."""
