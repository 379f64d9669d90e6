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

Topic ids (KIP-516): from Fetch v13 the request names topics by id, and a session is
either by id or by name for its whole life, as the broker's is (FETCH_SESSION_TOPIC_ID_ERROR
otherwise). ``build(wanted, uses_topic_ids)`` therefore starts a new session (a full fetch)
when the kind changes, and, by id, a partition whose topic id changed (the topic was
recreated) is forgotten under its old id and sent under its new one.

``handle_response`` takes the answer's session id and error: a full answer with a session
id starts the session; an incremental one moves the epoch on; any error (the broker
evicted the session, an epoch mismatch, a lost connection: ``reset``) makes the next fetch
full again, as Kafka's handler does.

Pure; the Ketch consumer (clients/aio/consumer.py) uses it, and so does the broker's
replica fetcher (broker/fetcher.py).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Collection

from clients.frozen import fast_init
from clients.protocol import messages
from clients.protocol.errors import ErrorCode
from clients.types import TopicPartition

__all__ = ["TOPIC_ID_FETCH_VERSION", "ZERO_TOPIC_ID", "FetchSessionHandler", "SessionRequest",
           "WantedPartition", "request_topics"]

INITIAL_EPOCH = 0
EPOCH_MAX = 0x7FFFFFFF
ZERO_TOPIC_ID = uuid.UUID(int=0)        # Kafka's Uuid.ZERO_UUID: no id known
TOPIC_ID_FETCH_VERSION = 13             # Fetch names topics by id from v13 (KIP-516)


@fast_init
@dataclass(frozen=True, slots=True)
class WantedPartition:
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    log_start_offset: int = -1
    topic_id: uuid.UUID = ZERO_TOPIC_ID      # needed to fetch at v13+


@fast_init
@dataclass(frozen=True, slots=True)
class SessionRequest:
    session_id: int
    session_epoch: int
    to_send: tuple[TopicPartition, ...]      # in the request's topics
    # In its forgotten_topics_data, each with the topic id it was fetched under.
    forgotten: tuple[tuple[TopicPartition, uuid.UUID], ...]
    uses_topic_ids: bool = False             # topics by id (Fetch v13+) or by name


@dataclass(slots=True)
class FetchSessionHandler:
    session_id: int = 0
    epoch: int = INITIAL_EPOCH               # the epoch of the next request
    partitions: dict[TopicPartition, WantedPartition] = field(default_factory=dict)
    uses_topic_ids: bool = False             # the session's kind (meaningful once it exists)
    _pending: dict[TopicPartition, WantedPartition] | None = None
    # After ``build_changed``: the changes to ``partitions`` the answer confirms (None:
    # gone), instead of a copy of every wanted partition per fetch.
    _pending_changes: dict[TopicPartition, WantedPartition | None] | None = None
    _pending_uses_topic_ids: bool = False

    def build(self, wanted: dict[TopicPartition, WantedPartition],
              uses_topic_ids: bool = False) -> SessionRequest:
        """The next request's session fields and partitions; ``uses_topic_ids``: it will
        be sent as Fetch v13+ (every wanted partition then has a topic id)."""
        assert not uses_topic_ids or all(w.topic_id != ZERO_TOPIC_ID for w in wanted.values())
        if self.epoch != INITIAL_EPOCH and uses_topic_ids != self.uses_topic_ids:
            self.reset()            # a session is by id or by name for its whole life
        self._pending, self._pending_changes = dict(wanted), None
        self._pending_uses_topic_ids = uses_topic_ids
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, tuple(wanted), (), uses_topic_ids)
        partitions = self.partitions
        to_send = tuple(tp for tp, w in wanted.items()
                        if (last := partitions.get(tp)) is not w and last != w)
        forgotten = tuple((tp, w.topic_id) for tp, w in partitions.items()
                          if (now := wanted.get(tp)) is None
                          or (uses_topic_ids and now.topic_id != w.topic_id))
        return SessionRequest(self.session_id, self.epoch, to_send, forgotten, uses_topic_ids)

    def build_changed(self, wanted: dict[TopicPartition, WantedPartition], changed: Collection[TopicPartition],
                      uses_topic_ids: bool = False) -> SessionRequest:
        """``build`` for a caller that knows which partitions may differ from the last
        answered fetch's (``changed``: added, moved or gone): only those are compared,
        not all of them (a follower's session of tens of thousands of partitions)."""
        if self.epoch == INITIAL_EPOCH or uses_topic_ids != self.uses_topic_ids:
            return self.build(wanted, uses_topic_ids)
        partitions = self.partitions
        self._pending, self._pending_changes = None, {}
        self._pending_uses_topic_ids = uses_topic_ids
        to_send = []
        forgotten = []
        for tp in changed:
            now, last = wanted.get(tp), partitions.get(tp)
            self._pending_changes[tp] = now
            if last is not None and (now is None or (uses_topic_ids and now.topic_id != last.topic_id)):
                forgotten.append((tp, last.topic_id))
            if now is not None and last is not now and last != now:
                to_send.append(tp)
        return SessionRequest(self.session_id, self.epoch, tuple(to_send), tuple(forgotten), uses_topic_ids)

    def handle_response(self, session_id: int, error_code: int) -> bool:
        """The answer to the last ``build``; False (and a full fetch next) on an error."""
        if error_code != ErrorCode.NONE or (self._pending is None and self._pending_changes is None):
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH:
            # A full answer: a session if the broker gave one (0: it had no room; ask again).
            self.session_id = session_id
            self.epoch = 1 if session_id != 0 else INITIAL_EPOCH
            self.uses_topic_ids = self._pending_uses_topic_ids
        else:
            self.epoch = self.epoch + 1 if self.epoch < EPOCH_MAX else 1
        if self._pending is not None:
            self.partitions, self._pending = self._pending, None
        else:
            assert self._pending_changes is not None
            partitions = self.partitions
            for tp, now in self._pending_changes.items():
                if now is None:
                    partitions.pop(tp, None)
                else:
                    partitions[tp] = now
            self._pending_changes = None
        return True

    def reset(self) -> None:
        """Next fetch: full, closing the current session and asking for a new one."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
        self._pending = self._pending_changes = None


def request_topics(session: SessionRequest, wanted: dict[TopicPartition, WantedPartition]
                   ) -> tuple[list[messages.FetchRequest.FetchTopic],
                              list[messages.FetchRequest.ForgottenTopic]]:
    """The Fetch request's ``topics`` (what ``session`` sends) and
    ``forgotten_topics_data``, grouped by topic: by topic id when the session uses ids
    (the name rides along, unwritten at v13+), else by name."""
    F = messages.FetchRequest
    topics: dict[object, tuple[str, uuid.UUID, list]] = {}
    for tp in session.to_send:
        w = wanted[tp]
        key = w.topic_id if session.uses_topic_ids else tp.topic
        topics.setdefault(key, (tp.topic, w.topic_id, []))[2].append(F.FetchPartition(
            partition=tp.partition, current_leader_epoch=w.current_leader_epoch,
            fetch_offset=w.fetch_offset, last_fetched_epoch=-1, log_start_offset=w.log_start_offset,
            partition_max_bytes=w.partition_max_bytes))
    forgotten: dict[object, tuple[str, uuid.UUID, list[int]]] = {}
    for tp, topic_id in session.forgotten:
        key = topic_id if session.uses_topic_ids else tp.topic
        forgotten.setdefault(key, (tp.topic, topic_id, []))[2].append(tp.partition)
    return ([F.FetchTopic(topic=name, topic_id=topic_id, partitions=ps)
             for name, topic_id, ps in topics.values()],
            [F.ForgottenTopic(topic=name, topic_id=topic_id, partitions=ps)
             for name, topic_id, ps in forgotten.values()])
