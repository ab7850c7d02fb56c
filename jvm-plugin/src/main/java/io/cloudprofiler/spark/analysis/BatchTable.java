package io.cloudprofiler.spark.analysis;

import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.types.StructType;

/** A table of the analysis's readers: a name and a schema, read in batches only. */
abstract class BatchTable implements Table, SupportsRead {
  private final String name;
  private final StructType schema;

  BatchTable(String name, StructType schema) {
    this.name = name;
    this.schema = schema;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  @SuppressWarnings("deprecation") // columns() is Spark 4's; Spark 3.5 asks for schema()
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return Set.of(TableCapability.BATCH_READ);
  }
}
