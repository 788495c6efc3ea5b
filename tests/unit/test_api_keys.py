"""ApiKey against Kafka's message definitions (kio's schema index)."""

from __future__ import annotations

from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map

from samsa.protocol.api_keys import ApiKey


def test_api_key_names_every_kafka_api_as_kafka_does() -> None:
    assert {key.value: key.name for key in ApiKey} == {
        key: name.upper() for key, name in api_key_map.items()
    }


def test_each_api_key_loads_the_request_schema_of_its_name() -> None:
    for key in ApiKey:
        request = load_request_schema(key, min(schema_name_map[api_key_map[key]]))
        assert request.__api_key__ == key, key.name


def test_an_api_key_is_the_int_on_the_wire() -> None:
    assert ApiKey.METADATA == 3
    assert ApiKey(18) is ApiKey.API_VERSIONS
    assert {ApiKey.FETCH: "fetch"}[1] == "fetch"
