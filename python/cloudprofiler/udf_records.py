"""The records of Python UDF batches (spark.cloudprofiler.udfs): what a Python worker logs per task and what the
analysis reads back (`analysis.udfs`).

Per task and Python evaluation (one BatchEvalPython, ArrowEvalPython, MapInArrow... node of the plan, which one
worker runs) the worker opens a channel named CHANNEL whose metadata names the task attempt, its UDFs and their
eval type. A record's TSC is the moment of an event; its tuple id is `value << KIND_BITS | kind`:

- START (value: ns the worker spent reading and unpickling the UDFs before it)
- OUT_ENTER: the serializer asks the function for its next output batch
- IN_ENTER: the function asks for its next input batch
- IN_EXIT (value: the batch's rows; ENDED: the input ended; UNKNOWN_ROWS: a batch whose rows were not found)
- OUT_EXIT (value: the output batch's rows, ENDED or UNKNOWN_ROWS alike)
- WAIT (value: ns the worker waited on the JVM's socket since the event before, in that event's part)
- END (value: 1 when the function or the serializer raised, else 0)

From one event to the next the worker is in the part PART_AFTER names: a partition of its time for the task.
"""
from __future__ import annotations

CHANNEL = "spark.python.udf"
EVENT = "python_udf"  # the channel's spark.event metadata
NAMES_KEY, EVAL_TYPE_KEY = "udf.names", "udf.eval_type"  # metadata: the UDFs' names (", "), PySpark's eval type
KIND_BITS = 3
START, OUT_ENTER, IN_ENTER, IN_EXIT, OUT_EXIT, WAIT, END = range(7)
ENDED, UNKNOWN_ROWS = -1, -2
PARTS = ("setup", "wait", "read", "function", "serialize")
# the part from an event to the next one (WAIT records carry their time in their value instead)
PART_AFTER = {START: "setup", OUT_ENTER: "function", IN_ENTER: "read", IN_EXIT: "function", OUT_EXIT: "serialize"}
# PySpark's eval types (pyspark's PythonEvalType) in the words of its API
EVAL_TYPES = {100: "Python UDF", 101: "Arrow Python UDF", 200: "pandas UDF", 201: "applyInPandas",
              202: "pandas aggregate UDF", 203: "pandas window UDF", 204: "pandas iterator UDF", 205: "mapInPandas",
              206: "cogrouped applyInPandas", 207: "mapInArrow", 208: "applyInPandasWithState", 209: "applyInArrow",
              210: "cogrouped applyInArrow", 250: "Arrow UDF", 251: "Arrow iterator UDF"}
