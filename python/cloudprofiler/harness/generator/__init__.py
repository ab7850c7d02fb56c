"""Throughput-controlled data generator: preloaded buckets, paced emitters, ZeroMQ transport.

Modules: workloads (what a tuple is), wire (how a bucket travels), emitter (the paced emission loop),
retention (the serve transport that keeps buckets until a reader commits them), fetch (a Python client of that
reader's protocol; Spark reads it in the JVM), consumer (a plain receiver that measures rate, drops and event-time
latency).
"""
