"""pysyncobj 0.3.17 sends an entry of 64 KiB or more in chunks and labels the last one by
the command's length, not the pickled entry's: the receiver's ChunkedEntryAssembler must
hand pysyncobj the whole entry however early the first "finish" comes."""
from __future__ import annotations

import pickle

from quorum.raft import ChunkedEntryAssembler

BATCH = 2 ** 16     # pysyncobj's appendEntriesBatchSizeBytes default


def chunks_as_pysyncobj_sends(entry: tuple[bytes, int, int]) -> list[dict]:
    """SyncObj.__sendAppendEntries' transmission loop, labels included."""
    data = pickle.dumps(entry, 2)       # pysyncobj.pickle.dumps: protocol 2
    messages = []
    for pos in range(0, len(data), BATCH):
        if pos == 0:
            transmission = "start"
        elif pos + BATCH >= len(entry[0]):
            transmission = "finish"
        else:
            transmission = "process"
        messages.append({"type": "append_entries", "transmission": transmission,
                         "data": data[pos:pos + BATCH], "term": 3, "commit_index": 9,
                         "prevLogIdx": 10, "prevLogTerm": 3})
    return messages


def command(size: int) -> bytes:
    # Metadata records: half the bytes >= 0x80 grow to two bytes each in the pickle.
    return bytes((i * 131) & 0xFF for i in range(size))


def test_an_entry_whose_first_finish_comes_early_is_handed_over_whole() -> None:
    entry = (command(120_000), 11, 3)
    messages = chunks_as_pysyncobj_sends(entry)
    labels = [m["transmission"] for m in messages]
    assert labels.count("finish") > 1       # the early "finish" this works around
    first_finish = labels.index("finish")
    truncated = b"".join(m["data"] for m in messages[:first_finish + 1])
    try:
        pickle.loads(truncated)
        raise AssertionError("the first finish was not early")
    except (pickle.UnpicklingError, EOFError):
        pass
    assembler = ChunkedEntryAssembler()
    handed = [assembler.receive("n1", m) for m in messages]
    for m in handed[:-1]:
        assert (m["transmission"], m["data"]) == ("start", b"")     # answered as a chunk
    last = handed[-1]
    assert "transmission" not in last and "data" not in last
    assert last["entries"] == [entry]
    assert (last["prevLogIdx"], last["prevLogTerm"], last["term"], last["commit_index"]) == (10, 3, 3, 9)


def test_chunks_of_two_senders_and_a_restarted_transmission_do_not_mix() -> None:
    a, b = (command(70_000), 5, 2), (command(200_000)[::-1], 6, 2)
    ma, mb = chunks_as_pysyncobj_sends(a), chunks_as_pysyncobj_sends(b)
    assembler = ChunkedEntryAssembler()
    assembler.receive("n1", ma[0])
    assert [assembler.receive("n2", m) for m in mb][-1]["entries"] == [b]
    # The leader resends from the start: the chunks before count for nothing.
    out = [assembler.receive("n1", m) for m in ma]
    assert out[-1]["entries"] == [a]
    # A chunk whose start never came is answered as a chunk and dropped.
    assert assembler.receive("n3", ma[-1])["transmission"] == "start"


def test_small_entries_pass_untouched() -> None:
    message = {"type": "append_entries", "entries": [(b"x", 1, 1)], "term": 1}
    assert ChunkedEntryAssembler().receive("n1", message) is message
