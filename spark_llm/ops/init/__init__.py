"""`spark-llm init`: from the head's address to a reviewed stack file, through the ssh path the program will use.

- command: the steps in order and the command; inputs: what it is given (the nodes' addresses, --config-from
  files, a recipe) and what that asks of the nodes; report: what it found, for a person and for `--json`;
- discover: the discovery script on the nodes, the head's fabric neighbours; facts: what it read, with sources;
- host_keys: each node's key scanned as the program reaches it, accepted by a person, pinned;
- checks: what init checks in what it found; document, stack_file: the stack file, each value with its source;
- write: the stack and its file, all or nothing.
"""
