"""Cluster metadata: a single node's topic table (:mod:`.local`) and a ZooKeeper cluster's
paths, session, controller, elections, reassignments, replica placement and metadata
cache (:mod:`.zk_data`, :mod:`.zk_client`, :mod:`.kafka_zk`, :mod:`.controller`,
:mod:`.election`, :mod:`.reassignment`, :mod:`.assignment`, :mod:`.zk_metadata`); the ACL
stores of both (:mod:`.acl_store`)."""
