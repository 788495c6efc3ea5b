"""Cluster metadata: the single-node store (ZooKeeper-coordinated clusters come later)."""
