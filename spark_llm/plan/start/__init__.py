"""A start of the group, watched: which phase a node is in, and what the readiness gate records.

- phases: a node's start phases from its log lines (per engine), each phase's stall bound and usual causes;
- rendezvous: how long the engine itself waits for its group, and the stall bounds kept below it;
- timeline: the gate's record of a start (its stdout line and the stack output) and the failed-start warning.
"""
