"""The rules of a running application's trace channels, changed from the driver: the plugin's RuleChanges, over
py4j for a classic session, through the SQL functions cp_set_rules and cp_rules for a Spark Connect one."""
from __future__ import annotations

import errno

from ..rules import rules_text
from .connect import is_connect


def _rule_changes(spark):
    """The plugin's io.cloudprofiler.spark.rules.RuleChanges in the driver's JVM."""
    return spark.sparkContext._jvm.io.cloudprofiler.spark.rules.RuleChanges


def set_rules(spark, rules) -> int:
    """Replace the rules of the trace channels of `spark`'s application (`cp_trace` channels whose handler no
    `spark.cloudprofiler.channel.<name>.handler` fixes): one text of rules separated by new lines or ';', a list
    of them, `pattern=handler[:param...]`, or the path of a rules file (`cloudprofiler.read_rules_file`); the first
    match wins. The driver checks them first: a bad rule raises `cloudprofiler.InvalidArgumentError` naming it, and
    the rules in force stay. The executors apply them within about a second. Returns the rules' new version (1, 2,
    ...; 0 is the rules at start). A Spark Connect session needs the server's `spark.sql.extensions` to include the
    plugin's (`cloudprofiler spark-conf` says so)."""
    from ..errors import InvalidArgumentError

    text = rules_text(rules)
    if is_connect(spark):
        answer = spark.sql("SELECT cp_set_rules(:rules)", args={"rules": text}).first()[0]
    else:
        answer = _rule_changes(spark).setRules(text)
    if not str(answer).isdigit():  # the driver's refusal, naming the bad rule
        raise InvalidArgumentError(errno.EINVAL, str(answer))
    return int(answer)


def rules(spark) -> list[str]:
    """The rules in force in `spark`'s application, one string a rule."""

    text = spark.sql("SELECT cp_rules()").first()[0] if is_connect(spark) else _rule_changes(spark).rules()
    return [line for line in str(text).splitlines() if line]
