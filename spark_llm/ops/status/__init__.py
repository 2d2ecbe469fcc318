"""`spark-llm status`: what runs against what the config gives, and what `pulumi up` would do.

- command: the verdict, the table and the command;
- read: what it reads from each node in one ssh session for every model (the node script, its pure parsers);
- router: the router's line (its container on the head, the models it lists); alerts: the alerts firing in the
  stack's Prometheus (spark-llm:monitoring);
- weights: the weights' drift, as preview judges it from the program's probe; firewall: the firewall's, the same way;
  gpu_clock: the GPU clock caps', the same way;
- memory: the memory admission's verdict where `pulumi up` would restart the group;
- canary: the canary asked now, against the one recorded at readiness;
- report: one model's verdict as it prints (table, lines, JSON);
- several: a stack of several models, a row and a block per model;
- pending: the operations pending in the state (an `up` at work, or one killed), and the command that clears them.
"""
