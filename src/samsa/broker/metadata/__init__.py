"""What the broker knows of the cluster (Kafka's ``MetadataCache``, ``ZkMetadataCache``,
``KafkaZkClient``, ``AutoTopicCreationManager``).

:mod:`.metadata_cache` answers Metadata, :mod:`.topic_manager` and
:mod:`.zk_topic_manager` create and delete topics on one node or through ZooKeeper,
:mod:`.zk_cluster` is the broker's ZooKeeper session, :mod:`.internal_topics` names the
topics the broker keeps for itself.
"""
