"""Pulumi ComponentResources: thin layers that turn the plan into resources and wire their order.

- stack: the stack's groups, router and monitoring declared from its one plan, and its outputs; cluster:
  SparkCluster, one model's group and all it needs, wired from one plan; bootstrap: the program's one config read
  and its one observation of the nodes;
- launch_scripts, engine_image, model_weights, engine_group, supervisor, firewall, router, monitoring, gpu_clock: one
  component each (LaunchScripts, EngineImage, ModelWeights, EngineGroup, Supervisor, Firewall, Router, Monitoring,
  GpuClockCaps);
- memory_admission: preview's memory warning, and the admission step per node before the group stops;
- commands: the remote.Command every step is; connection: the providers' connections to each node;
- drift_notes: a step's drift token and what preview says of it; state_identity: the state's id, made once.
"""
