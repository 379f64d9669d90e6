"""FsyncJournal: what pysyncobj hands it is on disk after sync(), torn tails are cut on open,
identical resends after a truncation do not rewrite, term and vote are durable at once."""
from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from quorum.journal import MAGIC, FsyncJournal


def entries(journal: FsyncJournal) -> list[tuple[bytes, int, int]]:
    return list(journal[:])


def test_entries_survive_a_reopen(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 6):
        journal.add(b"cmd-%d" % i, i, 1 + i // 3)
    journal.sync()
    expected = entries(journal)
    journal._destroy()
    assert entries(FsyncJournal(path)) == expected
    assert expected[-1] == (b"cmd-5", 5, 2)


def test_a_torn_tail_is_cut_on_open(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 4):
        journal.add(b"x" * 100, i, 1)
    journal.sync()
    journal._destroy()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:            # a crash in the middle of the third record
        f.truncate(size - 30)
    again = FsyncJournal(path)
    assert [e[1] for e in entries(again)] == [1, 2]
    again.add(b"y", 3, 2)                   # and appending continues after the cut
    again.sync()
    again._destroy()
    assert entries(FsyncJournal(path))[-1] == (b"y", 3, 2)


def test_a_flipped_byte_ends_the_log_at_the_damaged_record(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 4):
        journal.add(b"payload-%d" % i, i, 1)
    journal.sync()
    journal._destroy()
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0x01
    open(path, "wb").write(bytes(data))
    assert [e[1] for e in entries(FsyncJournal(path))] == [1, 2]


def test_an_identical_resend_after_truncation_is_restored_without_writing(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 6):
        journal.add(b"e%d" % i, i, 1)
    journal.sync()
    before = open(path, "rb").read()
    syncs = journal.fsync_count
    # What pysyncobj does when the leader rewinds nextIndex: delete from 3, re-add 3..5.
    journal.deleteEntriesFrom(2)
    for i in range(3, 6):
        journal.add(b"e%d" % i, i, 1)
    journal.sync()
    assert journal.lazy_restores == 3 and journal.fsync_count == syncs
    assert open(path, "rb").read() == before


def test_a_conflicting_entry_cuts_the_file_before_it_is_written(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 6):
        journal.add(b"old%d" % i, i, 1)
    journal.sync()
    journal.deleteEntriesFrom(2)
    journal.add(b"old3", 3, 1)              # same
    journal.add(b"new4", 4, 2)              # conflict: the rest of the file goes
    journal.sync()
    journal._destroy()
    assert entries(FsyncJournal(path)) == [(b"old1", 1, 1), (b"old2", 2, 1), (b"old3", 3, 1),
                                          (b"new4", 4, 2)]


def test_a_truncation_without_resend_is_final_after_sync(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 6):
        journal.add(b"e", i, 1)
    journal.sync()
    journal.deleteEntriesFrom(1)
    journal.sync()
    journal._destroy()
    assert [e[1] for e in entries(FsyncJournal(path))] == [1]


def test_compaction_and_clear_rewrite_the_file(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 8):
        journal.add(b"e%d" % i, i, 1)
    journal.deleteEntriesTo(5)
    assert [e[1] for e in entries(journal)] == [6, 7]
    journal.add(b"e8", 8, 1)
    journal.sync()
    journal._destroy()
    again = FsyncJournal(path)
    assert [e[1] for e in entries(again)] == [6, 7, 8]
    again.clear()
    again.add(b"snap", 20, 3)
    again.sync()
    again._destroy()
    assert entries(FsyncJournal(path)) == [(b"snap", 20, 3)]
    assert open(path, "rb").read().startswith(MAGIC)


def test_term_and_vote_are_durable_immediately_and_commit_index_once_a_second(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    journal.add(b"e", 1, 1)
    journal.setCurrentTerm(7, "127.0.0.1:9001")
    journal.setRaftCommitIndex(1)
    # No sync, no timer: a crash now (simulated by reopening) keeps term and vote.
    again = FsyncJournal(path)
    assert (again.getCurrentTerm(), again.getVotedForNodeId()) == (7, "127.0.0.1:9001")
    journal.setRaftCommitIndex(1)
    journal.onOneSecondTimer()
    assert FsyncJournal(path).getRaftCommitIndex() == 1


op_st = st.one_of(
    st.tuples(st.just("add"), st.binary(max_size=20), st.integers(0, 2)),
    st.tuples(st.just("delete_from"), st.integers(0, 10)),
    st.tuples(st.just("delete_to"), st.integers(0, 10)),
    st.tuples(st.just("sync")),
    st.tuples(st.just("reopen")),
)


@given(st.lists(op_st, max_size=30))
def test_journal_after_sync_and_reopen_matches_a_model(tmp_path_factory, ops) -> None:
    path = str(tmp_path_factory.mktemp("j") / "raft.journal")
    journal = FsyncJournal(path)
    model: list[tuple[bytes, int, int]] = []
    for op in ops:
        if op[0] == "add":
            index = model[-1][1] + 1 if model else 1
            term = (model[-1][2] if model else 1) + op[2]
            journal.add(op[1], index, term)
            model.append((op[1], index, term))
        elif op[0] == "delete_from":
            journal.deleteEntriesFrom(op[1])
            del model[op[1]:]
        elif op[0] == "delete_to":
            journal.deleteEntriesTo(op[1])
            del model[:op[1]]
        elif op[0] == "sync":
            journal.sync()
        else:
            journal.sync()
            journal._destroy()
            journal = FsyncJournal(path)
        assert entries(journal) == model
    journal.sync()
    journal._destroy()
    assert entries(FsyncJournal(path)) == model


def test_the_commit_index_is_stored_without_fsync_and_a_torn_copy_falls_back(tmp_path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = FsyncJournal(path)
    for i in range(1, 4):
        journal.add(b"e", i, 1)
    journal.setCurrentTerm(1, None)         # meta (durable) holds commit index 1
    journal.setRaftCommitIndex(3)
    syncs = journal.fsync_count
    journal.onOneSecondTimer()
    assert journal.fsync_count == syncs + 1     # the entries' fdatasync only
    assert FsyncJournal(path).getRaftCommitIndex() == 3
    with open(path + ".commit", "r+b") as f:    # torn: its CRC no longer matches
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09")
    assert FsyncJournal(path).getRaftCommitIndex() == 1


def test_entry_syncs_are_counted_with_their_time(tmp_path) -> None:
    # What a controller's /metrics shows (LogFlushStats): only fdatasyncs of new entries.
    journal = FsyncJournal(str(tmp_path / "raft.journal"))
    assert (journal.entry_syncs, journal.entry_sync_seconds) == (0, 0.0)
    journal.add(b"e", 1, 1)
    journal.sync()
    journal.sync()                          # nothing new: no fdatasync
    assert journal.entry_syncs == 1 and journal.entry_sync_seconds > 0
    journal.add(b"e", 2, 1)
    journal.sync()
    assert journal.entry_syncs == 2
