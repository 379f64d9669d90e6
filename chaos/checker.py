"""The history checker: the figures of ../shared/SCENARIOS.md and a verdict per scenario.

Theory of operation
-------------------
Input is what the workload recorded and what was read back after the faults healed:

- the attempts (``chaos.workload.Attempt``): producer, sequence number, partition, outcome
  (acked with an offset, failed, unknown) and when it resolved;
- the final log of each partition: (offset, value) for every record from the log start to
  the high watermark, as a fresh reader fetched it from the leader;
- each replica's batches below the high watermark, read from its segment files.

From those, ``check`` computes (every figure is a count of records unless it says
otherwise):

- ``acked``: attempts acknowledged (acks=0 sends included: such a producer is never told);
- ``lost``: acked but not found in the final log of their partition;
- ``wrong_offset``: acked and found, but not at the offset the producer was told;
- ``duplicated``: extra copies, a value found k times adds k-1;
- ``reordered``: per producer and partition, records found after one with a higher
  sequence number (first copies only; the producers send in sequence order);
- ``phantom``: records in the log that no producer attempted (or an attempt that was
  refused outright, ``failed``, found anyway);
- ``divergent``: replicas whose batches below the HW are not byte-for-byte the
  reference replica's (``compare_replicas``);
- ``unavailable_s``: the longest stretch, within the fault window, in which a partition
  that was being written to saw no acknowledged write.

Then ``judge`` compares the figures with a scenario's ``Expect`` plus the scenario's own
named checks and returns PASS or FAIL with the reasons. Everything here is pure.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Sequence

__all__ = [
    "Check", "Divergence", "Expect", "Figures", "Verdict", "acked_after", "check", "compare_replicas",
    "judge", "unavailability",
]


@dataclass(frozen=True, slots=True)
class Figures:
    attempted: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    lost: int = 0
    wrong_offset: int = 0
    duplicated: int = 0
    reordered: int = 0
    phantom: int = 0
    divergent: int = 0
    lagging: int = 0              # replicas that never reached the HW (not compared)
    corrupt: int = 0              # batches served with a bad CRC
    unavailable_s: float = 0.0
    # A few examples for the report (values of lost/duplicated records, replica ids).
    examples: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Divergence:
    divergent: tuple[int, ...]    # replica ids whose batches below the HW differ
    lagging: tuple[int, ...]      # replica ids holding less than the HW
    details: tuple[str, ...] = ()


def compare_replicas(batches: Mapping[int, Sequence], high_watermark: int, reference: int) -> Divergence:
    """``batches``: replica id -> its batches in offset order (objects with base_offset,
    last_offset and raw). Below the HW every replica must hold exactly the reference's
    batches, byte for byte (so the same offsets, leader epochs, records and CRCs)."""
    def below(bs: Sequence) -> list:
        return [b for b in bs if b.base_offset < high_watermark]

    ref = below(batches[reference])
    ref_end = ref[-1].last_offset + 1 if ref else 0
    divergent, lagging, details = [], [], []
    for replica, bs in sorted(batches.items()):
        mine = below(bs)
        mine_end = mine[-1].last_offset + 1 if mine else 0
        n = min(len(mine), len(ref))
        same_prefix = all(a.raw == b.raw for a, b in zip(mine[:n], ref[:n]))
        if not same_prefix:
            first = next(i for i in range(n) if mine[i].raw != ref[i].raw)
            divergent.append(replica)
            details.append(f"replica {replica} differs from {reference} at batch {first} "
                           f"(offset {ref[first].base_offset})")
        elif len(mine) > len(ref):
            divergent.append(replica)
            details.append(f"replica {replica} holds batches below HW {high_watermark} "
                           f"beyond the reference's end {ref_end}")
        elif mine_end < min(high_watermark, ref_end) or len(mine) < len(ref):
            lagging.append(replica)
            details.append(f"replica {replica} ends at {mine_end}, below HW {high_watermark}")
    return Divergence(tuple(divergent), tuple(lagging), tuple(details))


def unavailability(ack_times: Mapping[object, Sequence[float]], start: float, end: float) -> dict[object, float]:
    """Per partition: the longest gap between acknowledged writes within [start, end]
    (counting from ``start`` to the first ack and from the last ack to ``end``)."""
    out = {}
    for key, times in ack_times.items():
        inside = sorted(t for t in times if start <= t <= end)
        points = [start] + inside + [end]
        out[key] = max((b - a for a, b in zip(points, points[1:])), default=end - start)
    return out


def check(attempts: Iterable, logs: Mapping[tuple[str, int], Sequence[tuple[int, bytes | None]]],
          divergence: Iterable[Divergence] = (), window: tuple[float, float] | None = None,
          corrupt: int = 0, parse=None) -> Figures:
    """The SCENARIOS.md figures for one run. ``logs``: (topic, partition) -> [(offset,
    value)] in offset order; ``window``: the monotonic times within which unavailability
    counts (default: from the first send to the last resolution)."""
    if parse is None:
        from chaos.workload import parse_value as parse
    attempts = list(attempts)
    by_value: dict[tuple[str, tuple[str, int]], list] = {}
    for a in attempts:
        by_value[(a.topic, (a.producer, a.seq))] = a
    acked = [a for a in attempts if a.outcome == "acked"]
    examples: dict[str, list[str]] = {}

    def example(kind: str, text: str) -> None:
        bucket = examples.setdefault(kind, [])
        if len(bucket) < 5:
            bucket.append(text)

    found: dict[tuple[str, int], dict[tuple[str, int], list[int]]] = {}
    duplicated = reordered = phantom = 0
    for (topic, partition), records in logs.items():
        seen: dict[tuple[str, int], list[int]] = {}
        last_seq: dict[str, int] = {}
        for offset, value in records:
            ident = parse(value)
            attempt = by_value.get((topic, ident)) if ident is not None else None
            if attempt is None or attempt.partition != partition or attempt.outcome == "failed":
                phantom += 1
                example("phantom", f"{topic}-{partition}@{offset}: {value!r}")
                continue
            copies = seen.setdefault(ident, [])
            copies.append(offset)
            if len(copies) > 1:
                duplicated += 1
                example("duplicated", f"{topic}-{partition}: {value!r} at {copies}")
                continue
            producer, seq = ident
            if seq < last_seq.get(producer, -1):
                reordered += 1
                example("reordered", f"{topic}-{partition}@{offset}: {value!r} after seq {last_seq[producer]}")
            last_seq[producer] = max(seq, last_seq.get(producer, -1))
        found[(topic, partition)] = seen

    lost = wrong_offset = 0
    for a in acked:
        offsets = found.get((a.topic, a.partition), {}).get((a.producer, a.seq))
        if not offsets:
            lost += 1
            example("lost", f"{a.topic}-{a.partition}: {a.value!r} acked at {a.offset}")
        elif a.offset >= 0 and a.offset not in offsets:
            wrong_offset += 1
            example("wrong_offset", f"{a.topic}-{a.partition}: {a.value!r} acked at {a.offset}, found at {offsets}")

    divergent = lagging = 0
    for d in divergence:
        divergent += len(d.divergent)
        lagging += len(d.lagging)
        for text in d.details:
            example("divergence", text)

    unavailable_s = 0.0
    if attempts:
        start = window[0] if window else min(a.t_send for a in attempts)
        end = window[1] if window else max((a.t_done or a.t_send) for a in attempts)
        keys = {(a.topic, a.partition) for a in attempts if start <= a.t_send <= end}
        times: dict[object, list[float]] = {k: [] for k in keys}
        for a in acked:
            if (a.topic, a.partition) in times and a.t_done is not None:
                times[(a.topic, a.partition)].append(a.t_done)
        gaps = unavailability(times, start, end)
        unavailable_s = round(max(gaps.values(), default=0.0), 2)

    return Figures(
        attempted=len(attempts), acked=len(acked),
        failed=sum(1 for a in attempts if a.outcome == "failed"),
        unknown=sum(1 for a in attempts if a.outcome not in ("acked", "failed")),
        lost=lost, wrong_offset=wrong_offset, duplicated=duplicated, reordered=reordered,
        phantom=phantom, divergent=divergent, lagging=lagging, corrupt=corrupt,
        unavailable_s=unavailable_s, examples=examples)


def acked_after(attempts: Iterable, sent_after: float, acked_before: float) -> list:
    """Attempts acknowledged before ``acked_before`` whose request left after ``sent_after``
    (the last try's send time where the producer records it, else the first send).

    N11 asks it for the window in which a raised min.insync.replicas was in force at the
    leader and the ISR could not be complete (a follower paused): every such ack broke
    the promise. Judging by when the request *left* keeps an answer that was already on
    its way when the change landed out of the count, without a timing allowance."""
    out = []
    for a in attempts:
        left = a.t_try if getattr(a, "t_try", None) is not None else a.t_send
        if a.outcome == "acked" and left > sent_after and a.t_done is not None and a.t_done < acked_before:
            out.append(a)
    return out


@dataclass(frozen=True, slots=True)
class Check:
    """A scenario-specific condition, judged where it was observed."""
    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Expect:
    """What a scenario promises (N) or must demonstrate (L)."""
    lost: str = "0"                     # "0", ">0", or "=N" for an exact count
    divergent_zero: bool = True
    duplicated_zero: bool = False
    reordered_zero: bool = False
    phantom_zero: bool = True
    wrong_offset_zero: bool = True
    lagging_zero: bool = True
    unavailable_max_s: float | None = None

    def describe(self) -> str:
        parts = [f"lost{self.lost if self.lost[0] in '>=' else '=' + self.lost}"]
        if self.divergent_zero:
            parts.append("divergent=0")
        if self.duplicated_zero:
            parts.append("duplicated=0")
        if self.reordered_zero:
            parts.append("reordered=0")
        if self.unavailable_max_s is not None:
            parts.append(f"unavailable<{self.unavailable_max_s:g}s")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"


def judge(figures: Figures, expect: Expect, checks: Iterable[Check] = ()) -> Verdict:
    reasons = []
    lost = figures.lost
    if expect.lost == "0" and lost != 0:
        reasons.append(f"lost={lost}, expected 0")
    elif expect.lost == ">0" and lost <= 0:
        reasons.append("lost=0: the hazard did not show")
    elif expect.lost.startswith("="):
        want = int(expect.lost[1:])
        if lost != want:
            reasons.append(f"lost={lost}, expected {want}")
    if expect.divergent_zero and figures.divergent:
        reasons.append(f"divergent={figures.divergent}")
    if expect.lagging_zero and figures.lagging:
        reasons.append(f"lagging={figures.lagging} (replicas never reached the HW)")
    if expect.duplicated_zero and figures.duplicated:
        reasons.append(f"duplicated={figures.duplicated}")
    if expect.reordered_zero and figures.reordered:
        reasons.append(f"reordered={figures.reordered}")
    if expect.phantom_zero and figures.phantom:
        reasons.append(f"phantom={figures.phantom}")
    if expect.wrong_offset_zero and figures.wrong_offset:
        reasons.append(f"wrong_offset={figures.wrong_offset}")
    if figures.corrupt:
        reasons.append(f"corrupt batches served: {figures.corrupt}")
    if expect.unavailable_max_s is not None and figures.unavailable_s > expect.unavailable_max_s:
        reasons.append(f"unavailable_s={figures.unavailable_s} > {expect.unavailable_max_s}")
    for c in checks:
        if not c.ok:
            reasons.append(f"{c.name}: {c.detail}" if c.detail else c.name)
    return Verdict(not reasons, tuple(reasons))
