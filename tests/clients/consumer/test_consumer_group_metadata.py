"""consumer.group_metadata() for send_offsets_to_transaction (KIP-447), without a broker."""
from __future__ import annotations

import pytest

from clients.aio import Consumer
from clients.errors import IllegalStateError
from clients.types import ConsumerGroupMetadata

BOOT = {"bootstrap.servers": "127.0.0.1:9"}


def test_a_consumer_outside_any_generation_gives_its_group_only() -> None:
    c = Consumer({**BOOT, "group.id": "g", "group.instance.id": "i-1"})
    assert c.group_metadata() == ConsumerGroupMetadata("g", -1, "", "i-1")


def test_a_consumer_without_a_group_has_no_group_metadata() -> None:
    with pytest.raises(IllegalStateError, match="group.id"):
        Consumer(BOOT).group_metadata()
