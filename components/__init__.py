"""Pulumi ComponentResources: thin layers that turn the plan into resources and wire their order."""
