"""The engine group's room: what the group is, decided once for every caller.

Pure and standard library only, at the bottom of the layers (.importlinter), and shipped to the head beside the
supervisor (spark_llm.plan.supervisor.program_files): `pulumi preview` (spark_llm.plan.drift), `spark-llm status`,
the readiness gate and the supervisor import the same rules.

- times: Docker's times, read one way; flags: a command line's flags, read one way;
- members: a member's engine container as a record;
- verdict: is the group whole, with a caller's policy for what only `pulumi up` can mend;
- order: the order the group stops and starts in;
- budget: the supervisor's restarts within a window;
- logs: a member's engine log, read one way;
- weights: may the group start on the weights its members recorded (none unverified, one digest);
- memory: the memory admission's verdict (a rank's need against what its node gives now);
- serving: what "serving" means (the gate's one-token completion), each engine's health route, the API key file;
- wedge: is a running group wedged (no answer for a bound, over several probes);
- canary: the fixed completion at temperature 0 a start records and status asks again (the gate's record is the
  one compared with);
- router: when the supervisor brings the router back;
- fabric: what each rank's NCCL chose, read from its log lines (the gate's and the supervisor's fabric proof);
- fabric_ready: is each node's fabric ready for a start (RoCE devices ACTIVE with an address, one MTU), the rule
  preview, `up`, preflight and the supervisor's restarts apply;
- records: the supervisor's spec and state, typed; history: the head's history of starts, one writer, one reader;
- agent_metrics: what only spark-llm knows, as the Prometheus textfile the head's agent writes (the names the alert
  rules read).
"""
