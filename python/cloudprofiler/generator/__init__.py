"""Throughput-controlled data generator: preloaded buckets, paced emitters, ZeroMQ transport, the search.

Modules: workloads (what a tuple is), wire (how a bucket travels), emitter (the paced emission loop),
consumer (a plain receiver that measures rate, drops and event-time latency), maxtput (the search).
"""
