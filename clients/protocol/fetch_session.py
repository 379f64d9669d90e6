"""The fetcher's side of incremental fetch sessions (KIP-227; Kafka's FetchSessionHandler).

One handler per node. Each round the fetcher says which partitions it wants from that node
and where (``build``); the handler answers with the request's session id and epoch, the
partitions to send and the ones to forget:

- no session yet (or after an error): a full fetch with epoch 0, asking the broker for a
  session (and closing the old one, if any); every wanted partition is sent;
- in a session: an incremental fetch with the next epoch; only partitions that are new or
  whose position, epoch or size limit changed are sent, and partitions no longer wanted
  are forgotten. The broker still reads every partition of the session and answers only
  those with something new, so an idle consumer of many partitions sends and receives a
  few bytes.

``handle_response`` takes the answer's session id and error: a full answer with a session
id starts the session; an incremental one moves the epoch on; any error (the broker
evicted the session, an epoch mismatch, a lost connection: ``reset``) makes the next fetch
full again, as Kafka's handler does.

Pure; the Ketch consumer (clients/aio/consumer.py) uses it, and so does the broker's
replica fetcher (broker/fetcher.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

__all__ = ["FetchSessionHandler", "SessionRequest", "WantedPartition", "request_topics"]

INITIAL_EPOCH = 0
EPOCH_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class WantedPartition:
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class SessionRequest:
    session_id: int
    session_epoch: int
    to_send: tuple[TopicPartition, ...]      # in the request's topics
    forgotten: tuple[TopicPartition, ...]    # in its forgotten_topics_data


@dataclass(slots=True)
class FetchSessionHandler:
    session_id: int = 0
    epoch: int = INITIAL_EPOCH               # the epoch of the next request
    partitions: dict[TopicPartition, WantedPartition] = field(default_factory=dict)
    _pending: dict[TopicPartition, WantedPartition] | None = None

    def build(self, wanted: dict[TopicPartition, WantedPartition]) -> SessionRequest:
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, tuple(wanted), ())
        to_send = tuple(tp for tp, w in wanted.items() if self.partitions.get(tp) != w)
        forgotten = tuple(tp for tp in self.partitions if tp not in wanted)
        return SessionRequest(self.session_id, self.epoch, to_send, forgotten)

    def handle_response(self, session_id: int, error_code: int) -> bool:
        """The answer to the last ``build``; False (and a full fetch next) on an error."""
        if error_code != ErrorCode.NONE or self._pending is None:
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH:
            # A full answer: a session if the broker gave one (0: it had no room; ask again).
            self.session_id = session_id
            self.epoch = 1 if session_id != 0 else INITIAL_EPOCH
        else:
            self.epoch = self.epoch + 1 if self.epoch < EPOCH_MAX else 1
        self.partitions, self._pending = self._pending, None
        return True

    def reset(self) -> None:
        """Next fetch: full, closing the current session and asking for a new one."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
        self._pending = None


def request_topics(session: SessionRequest, wanted: dict[TopicPartition, WantedPartition]
                   ) -> tuple[list[messages.FetchRequest.FetchTopic],
                              list[messages.FetchRequest.ForgottenTopic]]:
    """The Fetch request's ``topics`` (what ``session`` sends) and
    ``forgotten_topics_data``, grouped by topic."""
    F = messages.FetchRequest
    topics: dict[str, list] = {}
    for tp in session.to_send:
        w = wanted[tp]
        topics.setdefault(tp.topic, []).append(F.FetchPartition(
            partition=tp.partition, current_leader_epoch=w.current_leader_epoch,
            fetch_offset=w.fetch_offset, last_fetched_epoch=-1, log_start_offset=w.log_start_offset,
            partition_max_bytes=w.partition_max_bytes))
    forgotten: dict[str, list[int]] = {}
    for tp in session.forgotten:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    return ([F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            [F.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()])
