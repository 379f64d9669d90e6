"""Kafka's client side, and the wire format the broker shares with it.

Lives here: the Kafka wire protocol (`clients.protocol`: primitive types, schema-driven
message codecs, framing, error codes), record batches v2 (`clients.records`), and later
Ketch's producer, consumer, admin client, CLI and Spark source.

Does not live here: anything that imports `broker`, `quorum` or `metadata_log`. Imports go
one way: those packages import `clients`, never the reverse.
"""
