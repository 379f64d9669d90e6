"""Delayed and scheduled delivery (issue 18): records whose ``ketch.deliver.at`` /
``ketch.deliver.after`` header puts them in the future are parked in the internal topic
``__ketch_delayed_delivery`` and appended to their target partition when due.

- ``divert``: the Produce-path decision (pure): which records of a batch are parked,
  the batch re-encoded without them (offset gaps, as compaction leaves), bad input refused;
- ``store``: the delay store's topic, keys and record codec (pure);
- ``index``: the on-disk index by due time (sqlite) and an in-memory one for tests;
- ``scheduler``: the delivery core (pure): replay of the store, what is due now;
- ``driver``: the asyncio shell: parks records for the Produce path, and runs a scheduler
  for each delay-store partition this broker leads.
"""
