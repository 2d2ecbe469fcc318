"""Everything that talks to a node from this machine: the ssh runner, the observation probe, the readiness gate,
and the operator's key files. Reads plan data; declares no Pulumi resource."""
