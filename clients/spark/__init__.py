"""PySpark on Ketch: the ``ketch`` data source (Spark's Kafka source and sink, in Python).

    from clients.spark import register
    register(spark)                                   # once per SparkSession
    df = (spark.readStream.format("ketch")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "clicks").load())

Batch and streaming reads return Spark's Kafka source schema (key, value, topic,
partition, offset, timestamp, timestampType, and headers with includeHeaders=true) as
Arrow record batches; ``df.write`` / ``writeStream`` take the Kafka sink's columns (topic,
key, value, headers, partition). Options are Spark's Kafka connector's, plus
``commitOffsetsToGroup`` and ``ketch.remote.storage`` (executors read tiered storage's
archive from the store directly: ``archive``). Needs the ``spark`` extra (pyspark 4.x,
pyarrow) and Java 17.

Lives here: ``options`` and ``planning`` (pure), ``source`` (the DataSource classes, over
``clients.Admin`` / ``Consumer`` / ``Producer``), ``archive`` (reading the archive's
store). PySpark is imported only when the source is (``clients.spark.options`` and
``planning`` do not need it).
"""
from __future__ import annotations

from typing import Any

__all__ = ["register", "KetchDataSource"]


def register(spark: Any) -> None:
    """Make ``format("ketch")`` known to ``spark`` (a SparkSession)."""
    from clients.spark.source import KetchDataSource
    spark.dataSource.register(KetchDataSource)


def __getattr__(name: str) -> Any:
    if name == "KetchDataSource":
        from clients.spark.source import KetchDataSource
        return KetchDataSource
    raise AttributeError(f"module 'clients.spark' has no attribute {name!r}")
