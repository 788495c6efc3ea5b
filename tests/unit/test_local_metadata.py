"""The single-node topic table: where it is found, and when start-up must refuse to guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.cluster.local import LocalMetadataStore
from samsa.errors import StorageError


def _store(*dirs: Path) -> LocalMetadataStore:
    store = LocalMetadataStore(tuple(d.resolve() for d in dirs), node_id=0, cluster_id="c1")
    store.load()
    return store


def test_a_topic_created_with_one_order_of_log_dirs_is_known_with_the_other(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _store(first, second).create_topic("orders", 3)

    swapped = _store(second, first)

    info = swapped.get("orders")
    assert info is not None and info.partitions == 3
    swapped.create_topic("payments", 1)
    assert not (second / "samsa-topics.json").exists()  # still one table, where it was


def test_a_topic_table_in_two_data_dirs_stops_start_up_naming_both(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _store(first).create_topic("orders", 1)
    _store(second).create_topic("payments", 1)

    with pytest.raises(StorageError, match="more than one data directory") as refused:
        _store(first, second)
    assert str(first.resolve()) in str(refused.value) and str(second.resolve()) in str(
        refused.value
    )


def test_no_topic_table_beside_partition_dirs_stops_start_up_and_writes_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    (data / "orders-0").mkdir(parents=True)

    with pytest.raises(StorageError, match="orders-0"):
        _store(data)
    assert sorted(p.name for p in data.iterdir()) == ["orders-0"]


def test_no_topic_table_in_an_empty_data_dir_starts_a_new_table(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "orders-0.2f1e-delete").mkdir(parents=True)  # deleted logs account for nothing
    store = _store(data)
    assert store.topics() == {}
    store.create_topic("orders", 1)
    assert (data / "samsa-topics.json").exists()


def test_a_topic_is_found_by_its_id_after_a_restart_and_a_change_and_not_after_deletion(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    topic_id = _store(data).create_topic("orders", 1).topic_id

    store = _store(data)  # the id index is rebuilt from the table
    store.set_partitions("orders", 3)
    found = store.by_id(topic_id)
    assert found is not None and (found.name, found.partitions) == ("orders", 3)

    store.delete_topic("orders")
    recreated = store.create_topic("orders", 1)
    assert store.by_id(topic_id) is None
    assert store.by_id(recreated.topic_id) == recreated


def test_another_brokers_data_dir_inside_the_data_dir_is_no_partition_and_no_missing_table(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    nested = data / "broker-1"  # reads as partition 1 of a topic "broker"
    (nested / "keep-0").mkdir(parents=True)
    (nested / "meta.properties").write_text("version=1\ncluster.id=other\nnode.id=1\n")

    store = _store(data)

    assert store.topics() == {}
    assert (nested / "meta.properties").read_text().startswith("version=1")
    assert store.new_dirs == [data.resolve()]
