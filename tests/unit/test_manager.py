"""The log manager: data directories, checkpoints, clean shutdown, background work."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.conftest import make_batch

from samsa.errors import KafkaStorageError, StorageError
from samsa.storage import LogConfig, LogManager
from samsa.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from samsa.testing.clock import ManualClock
from samsa.testing.waiting import wait_until_async
from samsa.types import TopicPartition

TP = TopicPartition("orders", 0)
HANG_S = 30  # a real-time deadline that only detects a hang


def test_new_logs_go_to_the_data_directory_with_fewest_logs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    manager.startup()
    for partition in range(4):
        manager.get_or_create_log(TopicPartition("t", partition))
    assert len(list((tmp_path / "a").glob("t-*"))) == 2
    assert len(list((tmp_path / "b").glob("t-*"))) == 2
    manager.close()


def test_logs_and_offsets_survive_a_clean_restart(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP)
    for _ in range(3):
        log.append_as_leader(make_batch([b"a", b"b"], timestamp=clock()))
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {TP: 6}

    again = LogManager([tmp_path], clock=clock)
    again.startup()
    assert again.had_clean_shutdown[tmp_path.resolve()]
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    reloaded = again.get_log(TP)
    assert reloaded is not None
    assert reloaded.log_end_offset == 6
    again.close()


def test_missing_clean_shutdown_marker_means_recovery(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    manager.get_or_create_log(TP).append_as_leader(make_batch([b"a"], timestamp=clock()))
    manager.close()
    (tmp_path / ".kafka_cleanshutdown").unlink()
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    assert not again.had_clean_shutdown[tmp_path.resolve()]
    again.close()


def test_log_start_offset_is_checkpointed(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP)
    for _ in range(5):
        log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    log.update_high_watermark(5)
    log.delete_records_before(3)
    manager.close()
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    reloaded = again.get_log(TP)
    assert reloaded is not None and reloaded.log_start_offset == 3
    again.close()


def test_a_second_manager_cannot_use_a_locked_directory(tmp_path: Path) -> None:
    first = LogManager([tmp_path])
    first.startup()
    with pytest.raises(StorageError, match="in use"):
        LogManager([tmp_path]).startup()
    first.close()


def test_checkpoint_files_round_trip_and_reject_garbage(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    offsets = {TopicPartition("a", 0): 5, TopicPartition("b-x", 12): 99}
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets
    path.write_text("0\n3\na 0 1\n")
    with pytest.raises(StorageError):
        read_offset_checkpoint(path)


def test_a_checkpoint_that_is_not_utf8_is_rejected_as_malformed(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 0 3\n")
    with pytest.raises(StorageError, match="malformed"):
        read_offset_checkpoint(path)


def test_a_damaged_recovery_point_checkpoint_recovers_every_log_despite_a_clean_marker(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP)
    for _ in range(3):
        log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    manager.close()
    segment = tmp_path / str(TP) / f"{0:020d}.log"
    with open(segment, "ab") as f:
        f.write(b"\x00" * 30)  # garbage only a recovery scan removes
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfe")
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    assert not again.had_clean_shutdown[tmp_path.resolve()]
    reloaded = again.get_log(TP)
    assert reloaded is not None and reloaded.log_end_offset == 3
    assert reloaded.append_as_leader(make_batch([b"b"], timestamp=clock())).first_offset == 3
    again.close()


def test_a_damaged_log_start_offset_checkpoint_starts_each_log_at_its_first_segment(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TP)
    for _ in range(5):
        log.append_as_leader(make_batch([b"a"], timestamp=clock()))
    log.update_high_watermark(5)
    log.delete_records_before(3)
    manager.close()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n7\norders 0\n")
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    reloaded = again.get_log(TP)
    assert reloaded is not None
    assert (reloaded.log_start_offset, reloaded.log_end_offset) == (0, 5)
    again.close()


def test_a_stray_log_is_renamed_aside_with_its_files_and_not_loaded_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    manager.get_or_create_log(TP).append_as_leader(make_batch([b"a"], timestamp=clock()))
    stray = manager.move_aside_stray(TP)
    manager.close()
    assert (
        stray is not None and stray.name.startswith("orders-0.") and stray.name.endswith("-stray")
    )
    assert (stray / f"{0:020d}.log").stat().st_size > 0
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    assert again.get_log(TP) is None
    assert stray.exists()
    again.close()


def test_deleted_log_disappears_and_is_not_reloaded(tmp_path: Path, clock: ManualClock) -> None:
    async def scenario() -> None:
        manager = LogManager([tmp_path], clock=clock)
        manager.startup()
        manager.get_or_create_log(TP).append_as_leader(make_batch([b"a"], timestamp=clock()))
        manager.delete_log(TP)
        await manager.shutdown()

    asyncio.run(scenario())
    again = LogManager([tmp_path], clock=clock)
    again.startup()
    assert again.get_log(TP) is None
    assert not any(p.name.startswith("orders-0") for p in tmp_path.iterdir())
    again.close()


def test_flush_messages_one_advances_the_recovery_point_on_each_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    async def scenario() -> list[int]:
        config = LogConfig.from_props({"flush.messages": 1})
        manager = LogManager([tmp_path], config, clock=clock)
        manager.startup()
        log = manager.get_or_create_log(TP)
        points = []
        for _ in range(3):
            log.append_as_leader(make_batch([b"a"], timestamp=clock()))
            await manager.maybe_flush(log)
            points.append(log.recovery_point)
        await manager.shutdown()
        return points

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_default_flush_policy_leaves_flushing_to_the_os(tmp_path: Path, clock: ManualClock) -> None:
    async def scenario() -> int:
        manager = LogManager([tmp_path], clock=clock)
        manager.startup()
        log = manager.get_or_create_log(TP)
        log.append_as_leader(make_batch([b"a"], timestamp=clock()))
        await manager.maybe_flush(log)
        point = log.recovery_point
        await manager.shutdown()
        return point

    assert asyncio.run(scenario()) == 0


def test_background_retention_deletes_expired_segments(tmp_path: Path, clock: ManualClock) -> None:
    async def scenario() -> tuple[int, int]:
        config = LogConfig.from_props(
            {"segment.bytes": 200, "retention.ms": 1000, "file.delete.delay.ms": 0}
        )
        manager = LogManager([tmp_path], config, retention_check_interval_ms=20, clock=clock)
        manager.startup()
        manager.start_background_tasks()
        log = manager.get_or_create_log(TP)
        for _ in range(4):
            log.append_as_leader(make_batch([b"x" * 100], timestamp=clock()))
        log.update_high_watermark(log.log_end_offset)
        clock.advance(2000)
        await wait_until_async(
            lambda: len(log.segments) == 1 and not list((tmp_path / "orders-0").glob("*.deleted")),
            "the old segments to be deleted",
            timeout=HANG_S,
            interval=0.01,
        )
        result = len(log.segments), log.log_start_offset
        await manager.shutdown()
        return result

    assert asyncio.run(scenario()) == (1, 3)


def test_roll_schedules_a_flush_of_the_finished_segment(tmp_path: Path, clock: ManualClock) -> None:
    async def scenario() -> int:
        config = LogConfig.from_props({"segment.bytes": 200})
        manager = LogManager([tmp_path], config, clock=clock)
        manager.startup()
        log = manager.get_or_create_log(TP)
        for _ in range(3):
            log.append_as_leader(make_batch([b"x" * 100], timestamp=clock()))
        await wait_until_async(
            lambda: log.recovery_point == 2,
            "the recovery point to reach 2",
            timeout=HANG_S,
            interval=0.01,
        )
        point = log.recovery_point
        await manager.shutdown()
        return point

    assert asyncio.run(scenario()) == 2


def test_several_recovery_threads_recover_every_log_of_a_crashed_directory(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = LogManager([tmp_path], clock=clock)
    manager.startup()
    tps = [TopicPartition("t", p) for p in range(40)]
    for tp in tps:
        manager.get_or_create_log(tp).append_as_leader(
            make_batch([b"%d" % tp.partition] * (tp.partition + 1), timestamp=clock())
        )
    manager.close()
    # As after a kill -9 before any flush: no clean-shutdown marker, recovery points 0.
    (tmp_path / ".kafka_cleanshutdown").unlink()
    write_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint", dict.fromkeys(tps, 0))
    crashed = LogManager([tmp_path], clock=clock, recovery_threads_per_data_dir=4)
    crashed.startup()
    assert not crashed.had_clean_shutdown[tmp_path.resolve()]
    ends = {tp: log.log_end_offset for tp, log in crashed.all_logs().items()}
    assert ends == {tp: tp.partition + 1 for tp in tps}
    crashed.close()


def test_a_log_that_cannot_be_created_leaves_no_directory_and_no_log(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.startup()
    (tmp_path / "t-2").write_bytes(b"in the way")  # a file where a log directory must go
    plan = manager.assign_dirs([TopicPartition("t", p) for p in range(4)])
    with pytest.raises(KafkaStorageError, match="t-2"):
        manager.build_logs(plan, manager.default_config)
    manager.release(tp for tp, _ in plan)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t-")) == ["t-2"]
    assert manager.all_logs() == {}
    manager.close()


def test_another_brokers_data_dir_inside_a_data_dir_is_not_loaded_nor_moved(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    nested = tmp_path / "broker-1"  # reads as partition 1 of a topic "broker"
    (nested / "keep-0").mkdir(parents=True)
    (nested / "meta.properties").write_text("version=1\ncluster.id=other\nnode.id=1\n")
    manager = LogManager([tmp_path], clock=clock)

    with caplog.at_level("WARNING", logger="samsa.storage.manager"):
        manager.startup()
    manager.close()

    assert manager.all_logs() == {}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["broker-1"]
    assert (nested / "keep-0").is_dir()
    assert any("broker-1 holds meta.properties" in r.getMessage() for r in caplog.records)
