"""The group coordinator over ``__consumer_offsets`` (Kafka's ``GroupCoordinator``):
membership and generations of classic groups (:mod:`.group_metadata_manager`), committed
offsets (:mod:`.offset_metadata_manager`), their record formats and loading."""
