"""The CI-sized subset of the chaos suite: N1, N2, N4, N9, N11, N12, N13, L2, L6, L7 with the small profile
(fewer records and repeats), and N9 again on a ``ketch up --secure`` cluster; N12C (the transaction coordinator's broker killed mid-commit) is
left out for its run time (a round that meets librdkafka's send_offsets hang takes ~160 s; see
chaos/RESULTS.md). Each starts its own cluster of real processes and stops it
by pid; a failing scenario keeps its cluster directory and names it in the message.

The full suite runs standalone: ``python -m chaos run`` (chaos/RESULTS.md)."""
from __future__ import annotations

import pytest

from chaos.runner import run_scenario
from chaos.scenarios import SCENARIOS
from chaos.scenarios.base import CI

pytestmark = [pytest.mark.process]

CI_SUBSET = ["N1", "N2", "N4", "N9", "N11", "N12", "N13", "L2", "L6", "L7"]


@pytest.mark.parametrize("scenario_id", CI_SUBSET)
def test_scenario(scenario_id: str, tmp_path) -> None:
    lines: list[str] = []
    result = run_scenario(SCENARIOS[scenario_id], CI, base_dir=str(tmp_path), say=lines.append)
    story = "\n".join(lines[-40:])
    assert result.verdict.passed, f"{result.line()}\n{story}"
    f = result.figures
    if scenario_id.startswith("N"):
        assert f.lost == 0 and f.divergent == 0, result.line()
    if scenario_id == "L2":
        assert f.lost > 0 and f.lost == result.extra["expected_lost"], result.line()


# On a `ketch up --secure` cluster (SASL_SSL on every Kafka listener, the controllers' too),
# one cheap scenario (~20 s): the faults and the checks are the same, every client of the
# harness logs in. The whole subset runs with `python -m chaos run --ci --secure`.
SECURED_CI_SUBSET = ["N9"]


@pytest.mark.parametrize("scenario_id", SECURED_CI_SUBSET)
def test_scenario_on_a_secured_cluster(scenario_id: str, tmp_path) -> None:
    lines: list[str] = []
    result = run_scenario(SCENARIOS[scenario_id], CI, base_dir=str(tmp_path), say=lines.append,
                          secure=True)
    story = "\n".join(lines[-40:])
    assert "secured cluster" in lines[0], lines[0]
    assert result.verdict.passed, f"{result.line()}\n{story}"
    assert result.figures.lost == 0 and result.figures.divergent == 0, result.line()
