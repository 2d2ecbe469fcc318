"""`spark-llm preflight`: every node checked before a deployment, and every model on each of its nodes, with a fix for
each failure.

- command: the checks in order and the command;
- script: the read-only script each node runs, and what it prints;
- checks: ssh, docker, GPU, disk, memory, image and flags, judged from what the nodes printed;
- network: the fabric interfaces and their MTU, the RoCE devices (spark_llm.plan.fabric_ready's rule), the MTU
  between head and workers, the API's ports;
- bandwidth: the fabric measured against its speed (`--bandwidth`), judged; bandwidth_run: its runs on the nodes.
"""
