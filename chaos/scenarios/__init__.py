"""The scenario catalogue of ../shared/SCENARIOS.md: N1-N10 (promises), L1-L6 (hazards),
D1 (the disk faults of its last section) and X1 (a one-way loss the suite added after it
found a broker bug there), by id."""
from __future__ import annotations

from chaos.scenarios.base import Scenario
from chaos.scenarios.delayed import DELAYED_SCENARIOS
from chaos.scenarios.loss import LOSS_SCENARIOS
from chaos.scenarios.mirror import MIRROR_SCENARIOS
from chaos.scenarios.no_loss import NO_LOSS_SCENARIOS
from chaos.scenarios.quorum import QUORUM_SCENARIOS

__all__ = ["SCENARIOS", "Scenario"]

SCENARIOS: dict[str, Scenario] = {s.id: s for s in NO_LOSS_SCENARIOS + LOSS_SCENARIOS
                                  + DELAYED_SCENARIOS + MIRROR_SCENARIOS + QUORUM_SCENARIOS}
