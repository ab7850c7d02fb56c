package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import java.io.Serializable;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.types.DataTypes;
import scala.Function2;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code cp_trace('channel', id)}: returns the id unchanged and logs (id, TSC) to a buffered channel of this
 * executor, per row, through JNI. It is non-deterministic so that the optimizer neither removes nor moves it.
 */
public final class TraceFunction {
  static final String NAME = "cp_trace";
  /** One channel per (process, name); the library closes them at shutdown. */
  private static final ConcurrentHashMap<String, Long> CHANNELS = new ConcurrentHashMap<>();

  private TraceFunction() {}

  static Expression build(Seq<Expression> args) {
    List<Expression> list = CollectionConverters.asJava(args);
    if (list.size() != 2 || !list.get(0).foldable() || !list.get(0).dataType().equals(DataTypes.StringType)) {
      throw new IllegalArgumentException(NAME + " takes a channel name (a string literal) and an id column, got "
          + list.size() + " argument(s): " + args.mkString(", "));
    }
    return new ScalaUDF(new Trace(), DataTypes.LongType, args, CollectionConverters.asScala(List.<Option<
        org.apache.spark.sql.catalyst.encoders.ExpressionEncoder<?>>>of()).toList(), Option.empty(),
        Option.apply(NAME), true, false);
  }

  /** The function Spark ships to executors: serializable, and holding nothing but its class. */
  static final class Trace implements Function2<String, Long, Long>, Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Long apply(String channel, Long id) {
      if (id != null) CloudProfiler.log(CHANNELS.computeIfAbsent(channel, TraceFunction::open), id);
      return id;
    }
  }

  private static long open(String name) {
    String failure = NativeLoader.load(null);
    if (failure != null) return 0; // logging to handle 0 is a counted no-op: the query still runs
    return CloudProfiler.openChannel(name, "buffered", new long[0], new String[] {"spark.event"}, new String[] {"sql_trace"});
  }
}
