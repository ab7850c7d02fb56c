package io.cloudprofiler.spark;

import io.cloudprofiler.spark.sql.OperatorProbes;
import io.cloudprofiler.spark.sql.RulesFunctions;
import io.cloudprofiler.spark.sql.TraceExpression;
import java.util.function.Function;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.execution.ColumnarRule;
import scala.Function1;
import scala.Tuple3;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Enable with {@code --conf spark.sql.extensions=io.cloudprofiler.spark.CloudProfilerExtensions}:
 * adds the SQL functions {@code cp_trace('channel', id)}, see {@link TraceExpression}, and {@code
 * cp_set_rules('rules')} and {@code cp_rules()}, see {@link RulesFunctions}, and times every
 * operator of every query when spark.cloudprofiler.operators is true, see {@link OperatorProbes}.
 * Guarded: a failure here leaves the session without the function, saying why in one log line,
 * instead of failing the session.
 */
public class CloudProfilerExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
  private static final Guard GUARD = new Guard("the SQL extension (" + TraceExpression.NAME + ")");

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    try {
      inject(extensions, TraceExpression.NAME, TraceExpression.class, TraceExpression::build);
      inject(extensions, RulesFunctions.SET, RulesFunctions.class, RulesFunctions::set);
      inject(extensions, RulesFunctions.GET, RulesFunctions.class, RulesFunctions::get);
    } catch (Throwable e) {
      GUARD.disable("injectFunction", e);
    }
    try {
      extensions.injectColumnar(
          new AbstractFunction1<SparkSession, ColumnarRule>() {
            @Override
            public ColumnarRule apply(SparkSession session) {
              return OperatorProbes.columnarRule(session);
            }
          });
    } catch (Throwable e) {
      GUARD.disable("injectColumnar", e);
    }
    return BoxedUnit.UNIT;
  }

  /**
   * The function's builder takes its arguments untyped, so that no cast to this jar's Seq type
   * precedes the guard in {@link TraceExpression#build}.
   */
  @SuppressWarnings({
    "unchecked",
    "rawtypes"
  }) // Spark's builder type names the Seq of its Scala version
  private static void inject(
      SparkSessionExtensions extensions,
      String name,
      Class<?> type,
      Function<Object, Expression> build) {
    extensions.injectFunction(
        (Tuple3)
            new Tuple3<>(
                new FunctionIdentifier(name),
                new ExpressionInfo(type.getName(), name),
                new AbstractFunction1<Object, Expression>() {
                  @Override
                  public Expression apply(Object arguments) {
                    return build.apply(arguments);
                  }
                }));
  }
}
