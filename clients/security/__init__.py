"""Authentication shared by Ketch's clients and servers (issue 16), as Kafka's ``clients``
module holds ``org.apache.kafka.common.security``: SCRAM math and verifiers (scram.py), the
per-connection SASL state machines (sasl.py), JAAS-style login options (jaas.py). All pure:
no sockets, no clock, randomness passed in."""
