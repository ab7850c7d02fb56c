package io.cloudprofiler.spark.ui;

import io.cloudprofiler.spark.sql.ScalaLists;
import org.apache.spark.SparkConf;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.status.AppHistoryServerPlugin;
import org.apache.spark.status.ElementTrackingStore;
import scala.collection.Seq;

/**
 * The History Server's plugin that shows the Cloudprofiler tab ({@link HistoryTabBase}), in Spark
 * 3.5's collections (jvm-plugin/src/main/scala-2.13 holds the other).
 */
public final class HistoryTab extends HistoryTabBase implements AppHistoryServerPlugin {
  @Override
  public Seq<SparkListener> createListeners(SparkConf conf, ElementTrackingStore store) {
    return ScalaLists.of(keeper(store));
  }
}
