"""spark-llm: deploy LLMs across several GPU nodes with Pulumi, in layers, each importing only those below it.

- group: the engine group's room (standard library only, shipped to the head);
- config: the stack's config, typed; plan: everything the resources and the CLI need, pure;
- remote: this machine talking to the nodes; ops: the operator CLI and the steps' entry points.
The Pulumi components (the floor between remote and ops) are the top-level `components` package.
"""
