"""PySpark's Python daemon whose workers time their Python UDFs' batches (spark.cloudprofiler.udfs): run as
`spark.python.daemon.module=cloudprofiler_udfs` (see __main__)."""
