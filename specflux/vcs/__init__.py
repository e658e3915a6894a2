"""git: commits of named paths with trailers, the history they leave, the state of the tree."""
