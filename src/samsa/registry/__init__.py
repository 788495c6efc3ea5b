"""A schema registry in the broker: Confluent Schema Registry's REST API v1.

Served when ``schema.registry.listeners`` is set (:mod:`.server`); schemas,
configs, modes and deletes are records of the compacted ``_schemas`` topic in the
format Confluent Schema Registry and Karapace write (:mod:`.records`), read back
into :mod:`.state` at start. Formats: AVRO and JSON Schema (:mod:`.formats`);
compatibility levels in :mod:`.compatibility`; the HTTP layer in :mod:`.http`,
the routes in :mod:`.api`, the operations in :mod:`.service`.
"""
