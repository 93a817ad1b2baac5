"""Helpers of hack/localcluster.py for its one real node (``up --real-node``). Internal to the tool; stdlib only.

- ``image``: assembles docker-archive tarballs (the pause image, the test image) without a registry or builder.
- ``host``: pure renderers of the node's config files and parsers of host state (mounts, iptables chains).
"""
