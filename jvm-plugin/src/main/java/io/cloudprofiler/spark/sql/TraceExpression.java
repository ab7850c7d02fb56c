package io.cloudprofiler.spark.sql;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.CloudProfilerExtensions;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Guard;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.rules.SessionRules;
import java.io.Serializable;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.Block;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.Seq; // the supertype of Spark's argument lists in Scala 2.12 and 2.13

/**
 * {@code cp_trace('channel', id)}: returns the id (a tinyint, smallint, int or bigint) unchanged
 * and logs (id, TSC) to a channel of this executor, per row, through JNI. {@code
 * cp_trace('channel', id, x, y)} logs only the ids with {@code id mod y < x} (the paper's XoY: the
 * same ids on every channel, to a channel of handler xoy(x, y)), and decides that in the generated
 * code, so that an id left out costs no JNI call. The channel's handler is the one {@code
 * spark.cloudprofiler.channel.<name>.handler} names, else xoy(x, y) for the sampled form, else the
 * one the rules in force choose by its name ({@code spark.cloudprofiler.rules}, changed while the
 * application runs with cps.set_rules; buffered where no rule matches): a trace point is switched
 * to counting, downsampling or nothing by configuration alone.
 *
 * <p>The generated code resolves the channel handle once per partition (when the generated class
 * initializes its state) and calls {@link CloudProfiler#log} per row; interpreted evaluation
 * resolves it on the first row.
 *
 * <p>It is non-deterministic ({@link #deterministic()} is false), so that the optimizer neither
 * removes, merges nor moves it. Written against the abstract class {@link Expression} only (no
 * Scala trait is mixed in), so that the class is plain Java; what of it names Scala collections is
 * in {@link SingleChildExpression}.
 *
 * <p>Guarded ({@link Guard}): a failure other than the user's bad arguments disables the function,
 * and from then on {@code cp_trace('channel', id)} is the id itself, untraced, so that queries run
 * on.
 */
public final class TraceExpression extends SingleChildExpression implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final String NAME = "cp_trace";

  /** One channel per (process, name); the library closes them at shutdown. */
  private static final ConcurrentHashMap<String, Long> CHANNELS = new ConcurrentHashMap<>();

  static {
    ChannelCaches.register(TraceExpression::forgetChannels);
  }

  private static final Guard GUARD = new Guard("the SQL function " + NAME);

  private final String channel;
  private final Expression child;

  /** XoY sampling: log ids with floorMod(id, y) < x; y == 0 logs every id. */
  private final long x;

  private final long y;
  private transient volatile boolean resolved;
  private transient long handle;

  public TraceExpression(String channel, Expression child, long x, long y) {
    this.channel = Objects.requireNonNull(channel, "channel");
    this.child = Objects.requireNonNull(child, "child");
    if (y < 0 || x < 0 || (y > 0 && x > y)) throw badXoy(channel, x, y);
    this.x = x;
    this.y = y;
  }

  /**
   * The function builder registered by {@link CloudProfilerExtensions}, given the arguments as
   * Spark passes them (a Scala Seq): bad arguments fail the query, naming the argument; any other
   * failure (such as the link check's, for a jar built for the other Scala) disables the function,
   * which from then on returns the id untraced.
   */
  public static Expression build(Object arguments) {
    List<Expression> args = ScalaLists.toJava((Seq<?>) arguments, Expression.class);
    if (!GUARD.disabled()) {
      try {
        Expression traced = build(args);
        traced.children(); // Spark's expression API with this jar's signatures: fails on the other
        // Scala's Spark
        return traced;
      } catch (IllegalArgumentException badArguments) {
        throw badArguments;
      } catch (Throwable e) {
        GUARD.disable("building " + NAME, e);
      }
    }
    if (args.size() < 2)
      throw new IllegalArgumentException(NAME + " is disabled (its reason is in the log)");
    return args.get(1);
  }

  private static Expression build(List<Expression> list) {
    if (list.size() != 2 && list.size() != 4) {
      throw new IllegalArgumentException(
          NAME
              + " takes a channel name (a string literal), an id column and "
              + "optionally x and y (integer literals: log ids with id mod y < x), got "
              + list.size()
              + " argument(s): "
              + list.stream().map(Expression::toString).collect(Collectors.joining(", ")));
    }
    Expression name = list.get(0);
    Object value =
        name.foldable() && name.dataType().equals(DataTypes.StringType) ? name.eval(null) : null;
    if (value == null || value.toString().isEmpty()) {
      throw new IllegalArgumentException(
          NAME + ": the channel name must be a non-empty string literal, got " + name.sql());
    }
    String channel = ((UTF8String) value).toString();
    if (list.size() == 2) return new TraceExpression(channel, list.get(1), 0, 0);
    long x = integerLiteral(channel, "x", list.get(2));
    long y = integerLiteral(channel, "y", list.get(3));
    if (y < 1) throw badXoy(channel, x, y); // y == 0 is the two-argument form's "every id"
    return new TraceExpression(channel, list.get(1), x, y);
  }

  private static IllegalArgumentException badXoy(String channel, long x, long y) {
    return new IllegalArgumentException(
        NAME
            + "('"
            + channel
            + "', id, x, y): expected 0 <= x <= y and y >= 1, got x="
            + x
            + ", y="
            + y);
  }

  private static long integerLiteral(String channel, String what, Expression e) {
    Object v = e.foldable() && javaType(e.dataType()) != null ? e.eval(null) : null;
    if (v == null) {
      throw new IllegalArgumentException(
          NAME
              + "('"
              + channel
              + "', id, x, y): "
              + what
              + " must be an integer literal, got "
              + e.sql());
    }
    return ((Number) v).longValue();
  }

  /**
   * The handle of this process's channel {@code name}, opened on first use with the handler
   * configured for it ({@code spark.cloudprofiler.channel.<name>.handler}), else xoy(x, y), or by
   * the rules when y is 0; 0 when the native library cannot load or the channel cannot open (which
   * disables the function), so that the query still runs: nothing logs to handle 0. Called by the
   * generated code once per partition.
   */
  public static long channel(String name, long x, long y) {
    try {
      Messages.RulesNow own = y == 0 ? ownRules() : null;
      // a Connect session that set rules of its own has channels of its own
      if (own != null)
        return CHANNELS.computeIfAbsent(
            name + "\0" + SessionRules.currentSession() + "\0" + own.version(),
            key -> open(name, x, y, own.text()));
      return CHANNELS.computeIfAbsent(
          name + (y == 0 ? "" : "\0" + x + "/" + y), key -> open(name, x, y, null));
    } catch (Throwable e) {
      GUARD.disable("opening channel '" + name + "'", e);
      return 0;
    }
  }

  /** Forgets every channel, as the library stops ({@link ChannelCaches}). */
  private static void forgetChannels() {
    CHANNELS.clear();
  }

  /**
   * The rules the Connect session of this task set for itself ({@link SessionRules}), or null: no
   * session, none set, or the driver did not say (the application's rules then choose).
   */
  private static Messages.RulesNow ownRules() {
    String session = SessionRules.currentSession();
    if (session == null) return null;
    try {
      Messages.RulesNow own = SessionRules.of(session);
      return own.version() > 0 ? own : null;
    } catch (Exception e) {
      return null;
    }
  }

  /** {@code sessionRules}: the rules of the task's Connect session, or null (the library's). */
  private static long open(String name, long x, long y, String sessionRules) {
    SparkEnv env = SparkEnv.get();
    if (NativeLoader.load(env == null ? null : Config.NATIVE_PATH.text(env.conf())) != null)
      return 0;
    Config.HandlerOption configured = env == null ? null : Config.channelHandler(env.conf(), name);
    Config.Handler handler =
        configured != null
            ? configured.handler()
            : y != 0
                ? new Config.Handler("xoy", new long[] {x, y})
                : sessionRules != null ? SessionRules.handlerFor(sessionRules, name) : null;
    String[] keys = {"spark.event"};
    String[] values = {"sql_trace"};
    try {
      return handler == null
          ? CloudProfiler.openByRules(name, keys, values)
          : CloudProfiler.openChannel(name, handler.name(), handler.params(), keys, values);
    } catch (CloudProfilerException e) {
      throw new CloudProfilerException(
          e.code(), NAME + ": cannot open channel '" + name + "': " + e.getMessage());
    }
  }

  public String channelName() {
    return channel;
  }

  @Override
  public Expression child() {
    return child;
  }

  @Override
  Expression withNewChild(Expression newChild) {
    return new TraceExpression(channel, newChild, x, y);
  }

  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public boolean foldable() {
    return false;
  }

  /**
   * Always nullable, even for a non-null id: otherwise the optimizer rewrites {@code
   * count(cp_trace(...))} into {@code count(1)} and then prunes the trace point, which nothing else
   * refers to, from the plan.
   */
  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public DataType dataType() {
    return child.dataType();
  }

  private static String javaType(DataType type) {
    if (type.equals(DataTypes.LongType)) return "long";
    if (type.equals(DataTypes.IntegerType)) return "int";
    if (type.equals(DataTypes.ShortType)) return "short";
    if (type.equals(DataTypes.ByteType)) return "byte";
    return null;
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    if (javaType(child.dataType()) != null) return TypeCheckResult.TypeCheckSuccess$.MODULE$;
    return new TypeCheckResult.TypeCheckFailure(
        NAME
            + "('"
            + channel
            + "', ...) takes an integral id (tinyint, "
            + "smallint, int or bigint), got "
            + child.dataType().sql()
            + " from "
            + child.sql());
  }

  @Override
  public Object eval(InternalRow row) {
    Object id = child.eval(row);
    if (id != null && !GUARD.disabled()) {
      try {
        log(((Number) id).longValue());
      } catch (Throwable e) {
        GUARD.disable("eval", e);
      }
    }
    return id;
  }

  private void log(long value) {
    if (y != 0 && Math.floorMod(value, y) >= x) return;
    if (!resolved) {
      handle = channel(channel, x, y);
      resolved = true;
    }
    if (handle != 0) CloudProfiler.log(handle, value);
  }

  /** The generated code; a disabled function generates its child's code: the id, untraced. */
  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    if (!GUARD.disabled()) {
      try {
        return tracingCode(ctx, ev);
      } catch (Throwable e) {
        GUARD.disable("doGenCode", e);
      }
    }
    return child.genCode(ctx);
  }

  private ExprCode tracingCode(CodegenContext ctx, ExprCode ev) {
    ExprCode id = child.genCode(ctx);
    String name = ctx.addReferenceObj("cpTraceName", channel, "java.lang.String");
    String handleTerm =
        ctx.addMutableState(
            "long",
            "cpTraceChannel",
            v ->
                v
                    + " = "
                    + TraceExpression.class.getName()
                    + ".channel("
                    + name
                    + ", "
                    + x
                    + "L, "
                    + y
                    + "L);",
            true,
            true);
    String id64 = "(long) " + ev.value();
    String kept = OperatorRows.keptCode(id64, x, y);
    String log =
        "if ("
            + handleTerm
            + " != 0L"
            + (y == 0 ? "" : " && " + kept)
            + ") "
            + CloudProfiler.class.getName()
            + ".log("
            + handleTerm
            + ", "
            + id64
            + ");";
    String code =
        child.nullable()
            ? "boolean "
                + ev.isNull()
                + " = "
                + id.isNull()
                + ";\n"
                + javaType(dataType())
                + " "
                + ev.value()
                + " = "
                + id.value()
                + ";\n"
                + "if (!"
                + ev.isNull()
                + ") "
                + log
                + "\n"
            : javaType(dataType()) + " " + ev.value() + " = " + id.value() + ";\n" + log + "\n";
    Block block = id.code().$plus(new CodeBlock(ScalaLists.of(code), ScalaLists.<JavaCode>of()));
    return ev.copy(block, child.nullable() ? ev.isNull() : FalseLiteral$.MODULE$, ev.value());
  }

  @Override
  public String prettyName() {
    return NAME;
  }

  @Override
  public String sql() {
    return NAME
        + "('"
        + channel.replace("'", "\\'")
        + "', "
        + child.sql()
        + (y == 0 ? "" : ", " + x + ", " + y)
        + ")";
  }

  @Override
  public String toString() {
    return NAME + "(" + channel + ", " + child + (y == 0 ? "" : ", " + x + ", " + y) + ")";
  }

  @Override
  public int productArity() {
    return 4;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) return channel;
    if (n == 1) return child;
    if (n == 2) return x;
    if (n == 3) return y;
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof TraceExpression;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof TraceExpression t
        && channel.equals(t.channel)
        && child.equals(t.child)
        && x == t.x
        && y == t.y;
  }

  @Override
  public int hashCode() {
    return Objects.hash(TraceExpression.class, channel, child, x, y);
  }
}
