"""PySpark's Python daemon with every Python UDF batch timed (spark.cloudprofiler.udfs): run as
`spark.python.daemon.module=cloudprofiler_udfs` (see __main__)."""
