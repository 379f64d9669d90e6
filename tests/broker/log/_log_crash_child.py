"""Child process for test_log_crash_process.py: append forever, acknowledging each append.

Usage: python _log_crash_child.py DATA_DIR

Every record's value is a function of its offset (`expected_value`), so after any number
of kills the parent can check every byte of the recovered log. The child prints
`READY <log_end_offset>` once the log is open, then `<base_offset> <last_offset>` after
each append returns, flushing stdout each time; it runs until it is killed.
"""

from __future__ import annotations

import hashlib
import sys

from broker.log import FileStorage, LogConfig, LogManager, LogManagerConfig
from clients.records import Record, build_batch

CONFIG = LogConfig(segment_bytes=256 * 1024, index_interval_bytes=1024,
                   max_message_bytes=512 * 1024)
MANAGER = LogManagerConfig(flush_offset_checkpoint_interval_ms=200,
                           retention_check_interval_ms=2**40)


def records_in_batch(base_offset: int) -> int:
    return 1 + base_offset % 5


def expected_value(offset: int) -> bytes:
    digest = hashlib.sha256(b"%d" % offset).digest()
    size = 50 + (offset * 7919) % 2000
    if offset % 61 == 0:
        size = 200_000  # big batches make a kill in the middle of a write likely
    return (digest * (size // 32 + 1))[:size]


def batch_at(base_offset: int) -> bytearray:
    count = records_in_batch(base_offset)
    records = [Record(base_offset + i, 1_000 + base_offset + i, b"%d" % (base_offset + i),
                      expected_value(base_offset + i)) for i in range(count)]
    return bytearray(build_batch(records, base_offset=base_offset))


def main() -> None:
    data_dir = sys.argv[1]
    storage = FileStorage(open_files_max=16)
    manager, _ = LogManager.open(storage, data_dir, now_ms=0, default_config=CONFIG,
                                 manager_config=MANAGER)
    log = manager.get_or_create_log("crash", 0, now_ms=0)
    out = sys.stdout
    out.write(f"READY {log.log_end_offset}\n")
    out.flush()
    now_ms = 0
    while True:
        base = log.log_end_offset
        result = log.append_as_leader(batch_at(base), leader_epoch=1, now_ms=now_ms)
        assert result.error_code == 0 and result.base_offset == base, result
        out.write(f"{result.base_offset} {result.last_offset}\n")
        out.flush()
        now_ms += 7
        if base % 11 == 0:
            manager.poll(now_ms)  # recovery point checkpoints


if __name__ == "__main__":
    main()
