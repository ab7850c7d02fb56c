package io.cloudprofiler.spark.sql;

import io.cloudprofiler.spark.rules.RuleChanges;
import io.cloudprofiler.spark.rules.SessionRules;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DataTypes;
import scala.collection.Seq;

/**
 * {@code cp_set_rules('rules')} (the new version, or the refusal naming the bad rule, as a string:
 * the rules in force then stay) and {@code cp_rules()} (the rules in force, one a line): the rules
 * of a Spark Connect session from SQL (such sessions have no py4j). Any SQL client of a Connect
 * server may run them, so the rules they set apply to the operations of that session only ({@link
 * SessionRules}), never to the application's, and a query outside a Connect session is refused.
 * Each is Spark's own {@code reflect()} calling {@link RuleChanges#setSessionRules} or {@link
 * RuleChanges#sessionRules} in the task that evaluates its row: {@code SELECT
 * cp_set_rules('ysb.*=null')} sets the rules once.
 */
public final class RulesFunctions {
  public static final String SET = "cp_set_rules";
  public static final String GET = "cp_rules";

  private RulesFunctions() {}

  public static Expression set(Object arguments) {
    return reflect(
        SET, "setSessionRules", ScalaLists.toJava((Seq<?>) arguments, Expression.class), 1);
  }

  public static Expression get(Object arguments) {
    return reflect(GET, "sessionRules", ScalaLists.toJava((Seq<?>) arguments, Expression.class), 0);
  }

  private static Expression reflect(
      String name, String method, List<Expression> args, int expected) {
    if (args.size() != expected) {
      throw new IllegalArgumentException(
          name
              + " takes "
              + (expected == 1 ? "the rules (a string)" : "no argument")
              + ", got "
              + args.size()
              + " argument(s)");
    }
    List<Expression> call =
        new ArrayList<>(
            List.of(
                Literal.create(RuleChanges.class.getName(), DataTypes.StringType),
                Literal.create(method, DataTypes.StringType)));
    call.addAll(args);
    return (Expression)
        FunctionRegistry.builtin()
            .lookupFunction(
                new FunctionIdentifier("reflect"), ScalaLists.of(call.toArray(new Expression[0])));
  }
}
