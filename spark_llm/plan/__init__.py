"""Pure: from the parsed stack to everything the resources and the operator's tools need. No Pulumi, no I/O but
reading the project's own `scripts/` (scripts).

- stack (what the stack deploys: its hosts once, a group plan per model, the router: the one builder);
- deployment (one group: the nodes, their order, the launch script, the group revision, every key path), nodes (one
  node), hosts (a node as ssh reaches it, every node resolved once), placement (do the models fit together);
- engines/ (each engine's command line), container (each node's engine container), start/ (a start's phases,
  timeline and rendezvous bound);
- steps (every node step, resolved once), and their scripts: image/, weights/, memory/, node_files, fabric,
  firewall, supervisor and supervisor_key (supervisor_report: what it did, read back), router;
- observation and drift (what a node runs now and what must be redone), host_record, fabric_ready (is each node's
  fabric ready for a start: its RoCE devices, its MTUs), fabric_proof;
- readiness and stdin_spec (the gate's spec, typed), rollback, cli_flags (what a pulumi command line asks of the
  group), node_commands (the commands printed for a person);
- monitoring/ (Prometheus's targets and the alert rules, generated from the stack and the engines' metric catalogs),
  gpu_clock (a node's GPU SM clock cap, applied and read back).
"""
