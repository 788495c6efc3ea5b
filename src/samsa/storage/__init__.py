"""Kafka's on-disk log: sparse indexes, segments, logs with recovery, and the log manager."""

from samsa.storage.log import AppendInfo, Log
from samsa.storage.log_config import LogConfig
from samsa.storage.log_loader import load_log
from samsa.storage.manager import LogManager
from samsa.storage.segment import FetchData, FileRegion, LogOffsetMetadata, LogSegment
from samsa.storage.validator import AppendOrigin

__all__ = [
    "AppendInfo",
    "AppendOrigin",
    "FetchData",
    "FileRegion",
    "Log",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "load_log",
]
