"""Partitions and their replicas (Kafka's ``Partition``, ``ReplicaManager``,
``ReplicaFetcherThread``, ``FetchManager``, ``DelayedFetch``,
``TransactionMarkerChannelManager``).

:mod:`.partition` is one partition's leader or follower state and its ISR,
:mod:`.replicas` the followers' progress as the leader sees it, :mod:`.replica_manager`
routes appends and reads to partitions, :mod:`.replica_fetcher` copies from leaders,
:mod:`.fetch_session` holds incremental fetch sessions (KIP-227) and :mod:`.fetch_manager`
(Kafka's ``FetchManager``) alone changes them, :mod:`.delayed_fetch` is the fetch purgatory
(``DelayedFetch``), :mod:`.marker_channel` sends transaction markers to partition leaders.
"""
