"""Pure: from a StackConfig to everything the resources and the operator's tools need. No Pulumi, no I/O but
reading the project's own `scripts/` (spark_llm.plan.scripts).

deployment (the nodes, their order, the launch script), engines and engine_flags (each engine's command line,
checked against its release's catalog), container (each node's engine container), the node steps' scripts
(image, weights, node_files, fabric) and steps (all of them, resolved once, as the components declare them),
observation and drift (what a node runs now and what must be redone).
"""
