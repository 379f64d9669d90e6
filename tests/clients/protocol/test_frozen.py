"""Messages are built once: every generated class is frozen, built or decoded (issue 11)."""
from __future__ import annotations

import dataclasses

import pytest

from clients.protocol import decode_message, encode_message, messages

F = messages.FetchResponse


def test_a_built_message_refuses_assignment_at_every_level() -> None:
    response = F(responses=[F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=0)])])
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.throttle_time_ms = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.responses[0].partitions[0].high_watermark = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.responses[0].partitions[0].current_leader.leader_id = 2


def test_a_decoded_message_is_frozen_and_equal_to_what_was_encoded() -> None:
    built = F(throttle_time_ms=7, responses=[F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=3, high_watermark=9, records=b"abc")])])
    for version in (4, 12):          # classic and flexible (tagged fields) layouts
        decoded = decode_message(F, version, encode_message(built, version))
        assert decoded.responses[0].partitions[0].high_watermark == 9
        assert bytes(decoded.responses[0].partitions[0].records) == b"abc"
        with pytest.raises(dataclasses.FrozenInstanceError):
            decoded.throttle_time_ms = 0
        # Fields this version does not carry hold their defaults, each instance its own.
        assert decoded.responses[0].partitions[0].snapshot_id == F.SnapshotId()


def test_defaults_are_fresh_per_instance_and_replace_makes_a_changed_copy() -> None:
    a, b = F(), F()
    assert a.responses == [] and a.responses is not b.responses
    assert F.PartitionData().current_leader is not F.PartitionData().current_leader
    changed = dataclasses.replace(a, throttle_time_ms=3)
    assert (changed.throttle_time_ms, a.throttle_time_ms) == (3, 0)
    assert F(1, 0, 0) == F(throttle_time_ms=1)     # positional, in field order, as before
