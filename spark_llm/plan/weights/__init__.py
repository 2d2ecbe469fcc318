"""The model weights, made identical on every node and verified by their manifests.

- steps: each node's weights step (download, head copy, upload) and the manifest's digest line; retention: what
  `pulumi destroy` does with each node's copy (model.purgeOnDestroy);
- fanout: the head -> workers copy (scripts/fanout.py's plan, shipped to the head with the program);
- sync: the bash building blocks of a manifest-planned copy (transports, the one rsync option list, progress).
"""
