"""The pure (sans-I/O) pieces of Ketch's clients, shared by the asyncio and blocking shells.

Lives here: configuration keys and validation (`config`), the metadata view
(`metadata`), the partitioner (`partitioner`), the producer's record accumulator and
idempotence state (`accumulator`), the transactional producer's state machine
(`transactions`), and the consumer's assignors, group membership state
and fetch planning.

Does not live here: anything that touches a socket, the event loop, threads, the clock or
the global random module (tests/test_layering.py checks). Time is an argument (`now_ms`),
randomness a `random.Random` passed in.
"""
