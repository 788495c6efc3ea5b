"""Single-node metadata: topics, their ids, partition counts and config overrides.

Kept in ``samsa-topics.json`` (the topic table), rewritten atomically on every
change, and ``meta.properties`` (cluster id, node id) in every data directory,
as Kafka keeps it. No other process is needed.

The topic table lives in one data directory: the first of ``log.dirs`` when it
is created, and wherever it is found afterwards, so the order of ``log.dirs``
may change between runs. Found in two directories, start-up stops: which one
is current cannot be told.

A missing table while the data directories hold partition directories stops
start-up with a message naming them. Rebuilding the table from the
directories was considered and refused: topic ids could be recovered (Kafka
keeps one in each partition's ``partition.metadata``), but configuration
overrides cannot — a compacted topic brought back with the default
``cleanup.policy=delete`` would lose its records to retention a week later —
nor can the partitions that were never written. An operator restores the file
(or adds the directory holding it back to ``log.dirs``) or moves the partition
directories away. A directory holding ``meta.properties`` is another broker's
data directory, never a partition: it neither stops start-up nor is moved.
Partitions the table does not name, when there is a table, are moved aside
(``-stray``, see :mod:`samsa.storage.manager`); nothing is deleted for lack of
metadata.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from samsa.errors import (
    ConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from samsa.storage.checkpoint import write_atomically
from samsa.storage.manager import (
    DELETE_DIR_SUFFIX,
    META_PROPERTIES,
    is_data_dir,
    parse_log_dir_name,
)

TOPICS_FILE = "samsa-topics.json"
MAX_TOPIC_NAME = 249
PRODUCER_ID_BLOCK = 1000
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1–249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not name or name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
        )


def new_cluster_id() -> str:
    """22 characters of URL-safe base64 of a random UUID, like Kafka's cluster ids."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    is_internal: bool = False


class LocalMetadataStore:
    """Owner of the topic table; one writer (the broker's event loop)."""

    def __init__(self, log_dirs: tuple[Path, ...], node_id: int, cluster_id: str = "") -> None:
        self.log_dirs = log_dirs
        self.node_id = node_id
        self.path = log_dirs[0] / TOPICS_FILE  # until load() finds where it is
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        """The same topics by id: Fetch and Produce v13+ name topics by id on every request."""
        self.cluster_id = cluster_id
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self.new_dirs: list[Path] = []
        """Data directories whose meta.properties this start wrote: new, or emptied (a
        cluster's broker checks them against the replicas ZooKeeper places on it)."""

    def load(self) -> None:
        """Read meta.properties (checking cluster and node ids agree) and the topic table."""
        self._read_meta()
        self.path = self._find_topic_table()
        self._write_meta()
        if self.path.exists():
            try:
                raw = json.loads(self.path.read_bytes())
                # Ids of the block in use when the broker stopped are never handed out again.
                self._next_producer_id = int(raw.get("producer_id_block_end", 0))
                self._producer_id_block_end = self._next_producer_id
                for item in raw["topics"]:
                    info = TopicInfo(
                        name=item["name"],
                        topic_id=uuid.UUID(item["topic_id"]),
                        partitions=int(item["partitions"]),
                        configs=dict(item.get("configs", {})),
                        is_internal=bool(item.get("is_internal", False)),
                    )
                    self._put(info)
            except (ValueError, KeyError, TypeError) as exc:
                raise StorageError(f"{self.path} is malformed: {exc}") from exc

    def stored_cluster_id(self) -> str:
        """The cluster id the data directories' meta.properties name ("" if none yet)."""
        found = self._meta_cluster_ids()
        if len(found) > 1:
            raise StorageError(f"data directories belong to different clusters: {sorted(found)}")
        return found.pop() if found else ""

    def _meta_cluster_ids(self) -> set[str]:
        found: set[str] = set()
        for directory in self.log_dirs:
            meta = directory / META_PROPERTIES
            if meta.exists():
                props = _read_properties(meta)
                if _node_id(meta, props, self.node_id) != self.node_id:
                    raise ConfigError(
                        f"{meta} belongs to node {props.get('node.id')}, not {self.node_id}; "
                        "use that node.id or another log.dirs"
                    )
                found.add(props.get("cluster.id", ""))
        found.discard("")
        return found

    def load_meta(self) -> None:
        """Read meta.properties, checking the cluster and node ids, and write it where missing.

        In a cluster, ``cluster_id`` is the one ZooKeeper holds: data directories of
        another cluster are refused, as Kafka refuses them (the broker would join the
        wrong cluster with the wrong data).
        """
        self._read_meta()
        self._write_meta()

    def _read_meta(self) -> None:
        for directory in self.log_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        existing = self.stored_cluster_id()
        if existing:
            if self.cluster_id and self.cluster_id != existing:
                raise ConfigError(
                    f"the cluster id {self.cluster_id} differs from {existing} in "
                    f"meta.properties of {', '.join(map(str, self.log_dirs))}: these data "
                    "directories belong to another cluster"
                )
            self.cluster_id = existing
        self.cluster_id = self.cluster_id or new_cluster_id()

    def _write_meta(self) -> None:
        for directory in self.log_dirs:
            meta = directory / META_PROPERTIES
            if not meta.exists():
                text = f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n"
                write_atomically(meta, text.encode())
                self.new_dirs.append(directory)

    def _find_topic_table(self) -> Path:
        """Where the topic table is, in whatever order ``log.dirs`` names the directories.

        Raises if it is in more than one, or in none while partition directories exist.
        """
        tables = [d / TOPICS_FILE for d in self.log_dirs if (d / TOPICS_FILE).exists()]
        if len(tables) > 1:
            raise StorageError(
                f"{TOPICS_FILE} (the topic table) is in more than one data directory: "
                f"{', '.join(map(str, tables))}; keep the current one, move the others "
                "away, and start again"
            )
        if tables:
            return tables[0]
        partitions = sorted(
            f"{child.parent.name}/{child.name}" if len(self.log_dirs) > 1 else child.name
            for directory in self.log_dirs
            for child in directory.iterdir()
            if child.is_dir()
            and not child.name.endswith(DELETE_DIR_SUFFIX)
            and parse_log_dir_name(child.name) is not None
            and not is_data_dir(child)  # another broker's data dir: never a partition
        )
        if partitions:
            shown = ", ".join(partitions[:5]) + (", …" if len(partitions) > 5 else "")
            raise StorageError(
                f"{TOPICS_FILE} (the topic table) is in none of log.dirs "
                f"({', '.join(map(str, self.log_dirs))}), but they hold {len(partitions)} "
                f"partition director{'y' if len(partitions) == 1 else 'ies'} ({shown}); "
                "starting would leave them without topics. Restore the file (or add the data "
                "directory that holds it to log.dirs) and start again; nothing was changed"
            )
        return self.log_dirs[0] / TOPICS_FILE

    def _save(self) -> None:
        data = {
            "version": 1,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": t.partitions,
                    "configs": dict(t.configs),
                    "is_internal": t.is_internal,
                }
                for t in sorted(self._topics.values(), key=lambda t: t.name)
            ],
        }
        write_atomically(self.path, json.dumps(data, indent=1).encode())

    # -- queries -----------------------------------------------------------------
    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def _put(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    # -- changes ---------------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, even across restarts (blocks of 1000)."""
        if self._next_producer_id >= self._producer_id_block_end:
            self._producer_id_block_end = self._next_producer_id + PRODUCER_ID_BLOCK
            self._save()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        is_internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, not {partitions}"
            )
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs or {}), is_internal)
        if not validate_only:
            self._put(info)
            self._save()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self._topics.pop(name, None)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        del self._by_id[info.topic_id]
        self._save()
        return info

    def set_partitions(self, name: str, count: int, *, validate_only: bool = False) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if count <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {info.partitions} partitions; the new count must be larger"
            )
        updated = replace(info, partitions=count)
        if not validate_only:
            self._put(updated)
            self._save()
        return updated

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        updated = replace(info, configs=dict(configs))
        self._put(updated)
        self._save()
        return updated


def _read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines of a properties file; a file that is not UTF-8 text raises."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{path} is not UTF-8 text (byte {exc.start}); restore it from another data "
            "directory of this broker or remove it"
        ) from None
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


def _node_id(path: Path, props: Mapping[str, str], default: int) -> int:
    value = props.get("node.id")
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise StorageError(
            f"{path} has node.id={value}, which is not a number; "
            "write this broker's node.id there or remove the file"
        ) from None
