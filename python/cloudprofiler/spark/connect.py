"""Which kind of PySpark session a caller holds: the classic one (with a SparkContext) or a Spark Connect client's."""


def is_connect(spark) -> bool:
    """A Spark Connect client's session (it has no SparkContext)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
