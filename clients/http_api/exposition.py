"""Prometheus text exposition (format 0.0.4) of a registry, written for large scrapes.

prometheus_client's ``generate_latest`` formats each sample through several helper calls;
at 10,000 partitions (40,000 per-partition series) that took 0.54 s of a broker's event
loop per scrape, against 0.13 s to collect the samples (bench/ops.py). This writer emits
the same format (checked against ``generate_latest`` sample for sample in
tests/http_api/test_exposition.py) with one f-string per sample. It covers what Ketch's
registries hold: counters, gauges, histograms, summaries, without exemplars or timestamps
and without the ``_created`` series (disabled: process_metrics.py). The nodes' HTTP servers
take it in pieces (``exposition_pieces``); ``text_exposition`` is the whole text.
"""
from __future__ import annotations

import math
from typing import Any, Collection, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

__all__ = ["CONTENT_TYPE", "GaugeRows", "exposition_pieces", "text_exposition"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# GaugeRows rows written per piece of exposition_pieces.
ROWS_PER_PIECE = 10_000
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary",
          "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram", "unknown": "untyped"}


def _label_value(v: str) -> str:
    if "\\" in v or '"' in v or "\n" in v:
        return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return v


def _help(doc: str) -> str:
    return doc.replace("\\", r"\\").replace("\n", r"\n")


def _value(v: float) -> str:
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    if v != v:
        return "NaN"
    return repr(float(v))


class GaugeRows(Metric):
    """A gauge family of many series held as rows, ``(label value, ..., value)``, instead
    of a Sample with a label dict each: ``exposition_pieces`` writes the rows with one
    format per row. A broker's per-partition gauges are four series per replica (400,000
    at 100k partitions); as Samples, collecting and writing them took ~2.5 s of its event
    loop per scrape. Label values are written as they are: topic names (Kafka's legal
    characters), numbers. ``samples``, for other readers of a registry (generate_latest),
    are made from the rows when read."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        super().__init__(name, documentation, "gauge")
        self.label_names = tuple(labels)
        self.rows: list[tuple[Any, ...]] = []

    @property
    def samples(self) -> list[Sample]:
        return [Sample(self.name, dict(zip(self.label_names, map(str, row[:-1]))), float(row[-1]))
                for row in self.rows]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        assert not value, "GaugeRows holds rows, not samples"    # Metric.__init__ sets []


def _rows_format(metric: GaugeRows) -> str:
    if not metric.label_names:
        return metric.name + " %s\n"
    return metric.name + "{" + ",".join(f'{k}="%s"' for k in metric.label_names) + "} %s\n"


def exposition_pieces(registry: CollectorRegistry, rows_per_piece: int = ROWS_PER_PIECE,
                      names: Collection[str] | None = None) -> Iterator[str]:
    """The exposition as pieces of text, a GaugeRows family's rows ``rows_per_piece`` at a
    time: a server on an event loop lets other work run between pieces. (A broker's whole
    exposition at 100k partitions is ~0.5 s, mostly writing those rows.) The pieces are
    made as they are taken: a collector's state is read when its family is reached.

    ``names``: only these series (sample names, as prometheus_client's own HTTP handler
    takes ``name[]``), from the collectors that describe them (and those that describe
    nothing): a probe of a broker's leader count does not read every partition's log."""
    out: list[str] = []
    append = out.append
    source = registry if names is None else registry.restricted_registry(names)
    for metric in source.collect():
        if isinstance(metric, GaugeRows):
            append(f"# HELP {metric.name} {_help(metric.documentation)}\n# TYPE {metric.name} gauge\n")
            form, rows = _rows_format(metric), metric.rows
            for start in range(0, len(rows), rows_per_piece):
                for row in rows[start:start + rows_per_piece]:
                    append(form % (*row[:-1], _value(row[-1])))
                yield "".join(out)
                out.clear()
            continue
        name = metric.name
        if metric.type == "counter":
            name += "_total"
        elif metric.type == "info":
            name += "_info"
        append(f"# HELP {name} {_help(metric.documentation)}\n# TYPE {name} {_TYPES.get(metric.type, 'untyped')}\n")
        for s in metric.samples:
            if s.labels:
                labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in s.labels.items())
                append(f"{s.name}{{{labels}}} {_value(s.value)}\n")
            else:
                append(f"{s.name} {_value(s.value)}\n")
    yield "".join(out)


def text_exposition(registry: CollectorRegistry) -> bytes:
    return "".join(exposition_pieces(registry)).encode()
