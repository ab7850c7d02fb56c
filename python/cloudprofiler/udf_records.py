"""The records of Python UDF batches (spark.cloudprofiler.udfs): what a Python worker logs per task and what the
analysis reads back (`analysis.udfs`).

Per task and Python evaluation (one BatchEvalPython, ArrowEvalPython, MapInArrow... node of the plan, or an RDD's
functions that PySpark pipelines into one, which one worker runs) the worker opens a channel named CHANNEL whose
metadata names the task attempt, its UDFs and their eval type. A record's TSC is the moment of an event; its tuple id
is `value << KIND_BITS | kind`.

Not every batch is timed: a cycle (the serializer asking for an output batch, the input batches read for it, the
function making it, its serialization, until the serializer asks for the next) is timed for the first EXACT
output batches of the task, and after them each with probability 1 / SAMPLE_EVERY (geometric skips from a generator
seeded by the task's partition: runs repeat). An untimed cycle costs no record and no clock read; an UNTIMED
record at the end of a timed cycle and the next timed cycle's OUT_ENTER (or END) bound the untimed ones between.
Events:

- START (value: ns the worker spent reading and unpickling the UDFs before it)
- OUT_ENTER (value: the output batch's index from 0): a timed cycle begins, the serializer asks for that batch
- IN_ENTER (value: the input batch's index from 0): the function asks for its next input batch
- IN_EXIT (value: the batch's rows; ENDED: the input ended; UNKNOWN_ROWS: a batch whose rows were not found)
- OUT_EXIT (value: the output batch's rows, ENDED or UNKNOWN_ROWS alike)
- UNTIMED: the cycles from here to the next event are untimed
- END (value: 1 when the function or the serializer raised, else 0)

From one event to the next the worker is in the part PART_AFTER names: a partition of its time for the task, in
which "untimed" stands for cycles whose parts were not measured. Not events:

- WAIT (value: ns the worker waited on the JVM's socket since the event before, in that event's part; timed cycles
  only)
- TRANSFER (value: ns the worker was off the CPU in the read of a timed cycle's input batch after its first bytes:
  waiting for the rest of the JVM's bytes, the JVM still writing the batch, or for a CPU on a loaded host; in the
  read part, logged before its IN_EXIT)
- IN_BATCHES, IN_ROWS, OUT_BATCHES, OUT_ROWS (value: the task's input and output batches and their rows, every
  batch counted, timed or not; logged once, before END)
"""
from __future__ import annotations

CHANNEL = "spark.python.udf"
EVENT = "python_udf"  # the channel's spark.event metadata
NAMES_KEY, EVAL_TYPE_KEY = "udf.names", "udf.eval_type"  # metadata: the UDFs' names (", "), PySpark's eval type
# metadata, where the worker knows what the eval type does not say: a Python data source's reads run as a mapInArrow
KIND_KEY, DATA_SOURCE = "udf.kind", "Python data source"
# metadata: the layout of the records below; channels of another layout (before sampled cycles: none) are not read
FORMAT_KEY, FORMAT = "udf.records", "2"
KIND_BITS = 4
START, OUT_ENTER, IN_ENTER, IN_EXIT, OUT_EXIT, UNTIMED, END, WAIT, IN_BATCHES, IN_ROWS, OUT_BATCHES, OUT_ROWS, \
    TRANSFER = range(13)
LAST_EVENT = END  # kinds up to this one are events
ENDED, UNKNOWN_ROWS = -1, -2
EXACT = 16  # the first output batches of a task, all timed
SAMPLE_EVERY = 64  # after them, each batch is timed with probability 1 / SAMPLE_EVERY
PARTS = ("setup", "wait", "transfer", "read", "function", "serialize")
# the records that carry ns of a part of their own, taken out of the part they fall in
CARRIED = {WAIT: "wait", TRANSFER: "transfer"}
# the part from an event to the next one (WAIT records carry their time in their value instead)
PART_AFTER = {START: "setup", OUT_ENTER: "function", IN_ENTER: "read", IN_EXIT: "function", OUT_EXIT: "serialize",
              UNTIMED: "untimed"}
TABLE_UDF = 300  # PySpark's SQL_TABLE_UDF: a pickled Python UDTF, whose output item per input row is a tuple of rows
NON_UDF = 0  # PySpark's NON_UDF: an RDD's functions (map, filter, mapPartitions... pipelined into one)
COGROUPED = (206, 210)  # PySpark's cogrouped maps (pandas, Arrow): an input item holds both sides' rows of a key
# PySpark's eval types (pyspark's PythonEvalType) in the words of its API
EVAL_TYPES = {NON_UDF: "RDD function", 100: "Python UDF", 101: "Arrow Python UDF", 200: "pandas UDF",
              201: "applyInPandas", 202: "pandas aggregate UDF", 203: "pandas window UDF", 204: "pandas iterator UDF",
              205: "mapInPandas", 206: "cogrouped applyInPandas", 207: "mapInArrow", 208: "applyInPandasWithState",
              209: "applyInArrow", 210: "cogrouped applyInArrow", 250: "Arrow UDF", 251: "Arrow iterator UDF",
              TABLE_UDF: "Python UDTF", 301: "Arrow Python UDTF", 302: "Arrow UDTF"}
