package io.cloudprofiler.spark.source;

import org.apache.spark.sql.connector.read.InputPartition;

/** A micro-batch's part of one emitter: offsets [start, end). */
record EmitterRange(String endpoint, long start, long end) implements InputPartition {}
