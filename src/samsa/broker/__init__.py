"""The broker: one process that serves Kafka's wire protocol.

Sub-packages, with the Kafka classes they correspond to:

- :mod:`samsa.broker.network` — listeners and connections (Kafka's ``SocketServer``,
  ``Acceptor``, ``Processor``, ``RequestChannel``): accepting sockets, framing, buffers,
  the per-connection request loop and dispatch to the API registry.
- :mod:`samsa.broker.security` — who may do what (``Authorizer``, ``SaslServerAuthenticator``,
  ``ScramCredentialCache``, the listeners' security settings).
- :mod:`samsa.broker.replication` — partitions, the ISR and the replica manager
  (``Partition``, ``ReplicaManager``, ``ReplicaFetcherThread``, ``FetchManager``,
  ``TransactionMarkerChannelManager``).
- :mod:`samsa.broker.metadata` — what the broker knows of the cluster (``MetadataCache``,
  topic creation and deletion, the ZooKeeper session, internal topics).
- :mod:`samsa.broker.handlers` — one module per API family (Kafka's ``KafkaApis``).
- :mod:`samsa.broker.quota`, :mod:`samsa.broker.metrics` — client quotas and metrics.

:mod:`samsa.broker.server` assembles them (Kafka's ``KafkaServer``/``BrokerServer``),
taking what a single node and a ZooKeeper cluster build differently from the two
factories of :mod:`samsa.broker.modes`.
"""
