"""The engine image on every node: which node runs which step, and its script.

- steps: each node's image step (present, pull, the head's image sent to the workers, from this machine);
- layers: only the layers a worker lacks, moved head -> worker.
"""
