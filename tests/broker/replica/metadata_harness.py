"""A metadata log replayed record by record, as the broker's listener does, for driving
the data-plane core (``ReplicaManager.apply_metadata``) in unit tests."""
from __future__ import annotations

from metadata_log import EMPTY_IMAGE, MetadataDelta, Provenance


class Metadata:
    def __init__(self) -> None:
        self.image = EMPTY_IMAGE
        self.offset = 0

    def commit(self, *records):
        """(image, typed changes) of one committed batch."""
        delta = MetadataDelta(self.image)
        for r in records:
            delta.replay(r)
        self.offset += len(records)
        self.image = delta.apply(Provenance(self.offset, 1))
        return self.image, list(delta.changes)
