"""The rules of a running application's trace channels, changed from the driver: the plugin's RuleChanges."""
from __future__ import annotations

import errno

from ..rules import rules_text


def _rule_changes(spark):
    """The plugin's io.cloudprofiler.spark.RuleChanges in the driver's JVM."""
    return spark.sparkContext._jvm.io.cloudprofiler.spark.RuleChanges


def set_rules(spark, rules) -> int:
    """Replace the rules of the trace channels of `spark`'s application (`cp_trace` channels whose handler no
    `spark.cloudprofiler.channel.<name>.handler` fixes): one text of rules separated by new lines or ';', a list
    of them, `pattern=handler[:param...]`, or the path of a rules file (`cloudprofiler.read_rules_file`); the first
    match wins. The driver checks them first: a bad rule raises
    `cloudprofiler.InvalidArgumentError` naming it, and the rules in force stay. The executors apply them within
    about a second. Returns the rules' new version (1, 2, ...; 0 is `spark.cloudprofiler.rules`)."""
    from pyspark.errors import IllegalArgumentException  # what PySpark makes of the driver's refusal

    from ..errors import InvalidArgumentError

    text = rules_text(rules)
    try:
        return int(_rule_changes(spark).setRules(text))
    except IllegalArgumentException as e:
        raise InvalidArgumentError(errno.EINVAL, str(e).splitlines()[0]) from None  # as the library's own


def rules(spark) -> list[str]:
    """The rules in force in `spark`'s application, one string a rule."""
    return [line for line in str(_rule_changes(spark).rules()).splitlines() if line]
