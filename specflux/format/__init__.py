"""The task-state file: its outline, the lossless document, the values in it, new text, the merge of two edits."""
