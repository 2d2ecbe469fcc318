"""The operator CLI (`spark-llm`: entry, then cli) and the entry points the steps run, one module a command.

- the commands: init/ (a stack file from the head's address), preflight/, status/, logs, smoke, restart, rollback
  (rollback_weights: which weights it serves), node_exec (`exec`), recipes, top and dashboard (spark-llm:monitoring,
  through prometheus: the stack's Prometheus as they read it);
- the steps' entry points: readiness_gate, admission (the memory admission), after_failure (a failed start's note or
  rollback);
- pulumi_cli: the Pulumi CLI as they use it; left_behind: what a dead pulumi command leaves running; render: output
  for people and scripts; sections: the node scripts' `capture` output.

Every command reads the stack's config through the Pulumi CLI and builds the same plan as the Pulumi program
(spark_llm.config.parse, spark_llm.plan.deployment.build_plan), and reaches the nodes with spark_llm.remote.
"""
