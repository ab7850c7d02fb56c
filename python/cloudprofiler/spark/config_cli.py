"""`cloudprofiler config set|get --app <logDir>/<app id>`: the rules of a running application's trace channels."""
from __future__ import annotations

from pathlib import Path

from .rule_requests import DEFAULT_TIMEOUT_S


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="action")
    for action, help_text in (("set", "replace the rules; prints their new version"),
                              ("get", "print the version and the rules in force, one a line")):
        p = sub.add_parser(action, help=help_text, description=help_text)
        p.add_argument("--app", required=True, metavar="FOLDER",
                       help="the application's folder, <logDir>/<app id> (a path or a Hadoop-compatible URI)")
        p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                       help=f"seconds to wait for the driver's answer (default {DEFAULT_TIMEOUT_S:g})")
        if action == "set":
            p.add_argument("rules", nargs="*", help="rules, pattern=handler[:param...], one an argument or "
                                                    "separated by ';'; checked here before they are sent")
            p.add_argument("--file", type=Path, help="a rules file (JSON or TOML, see README) instead of rules")


def run(args) -> int:
    import sys

    from ..errors import CloudProfilerError
    from ..rules import rules_text
    from .checks import check_rules
    from .rule_requests import app_rules, check_app_folder, set_app_rules

    def refuse(problem: str) -> int:  # a bad argument, found before anything is asked of the driver
        print(f"cloudprofiler config {args.action}: {problem}", file=sys.stderr)
        return 2

    if not args.timeout > 0:
        return refuse(f"--timeout {args.timeout:g}: seconds to wait for the driver's answer, a number > 0")
    if args.action == "set" and bool(args.rules) == bool(args.file):
        return refuse("give either rules or --file")
    try:
        text = ""
        if args.action == "set":
            text = rules_text(args.file) if args.file else "\n".join(args.rules)
            try:
                check_rules("rules", text)  # the driver's own check, made here
            except CloudProfilerError as exc:
                return refuse(f"rules refused, the rules in force stay: {str(exc).split(' is invalid: ', 1)[-1]}")
        check_app_folder(args.app)
    except CloudProfilerError as exc:
        return refuse(str(exc))
    try:
        if args.action == "get":
            version, rules = app_rules(args.app, args.timeout)
            print(f"version {version}")
            print("\n".join(rules))
            return 0
        print(f"version {set_app_rules(args.app, text, args.timeout)}")
        return 0
    except (CloudProfilerError, TimeoutError) as e:
        print(f"cloudprofiler config {args.action}: {e.args[-1] if isinstance(e, TimeoutError) else e}",
              file=sys.stderr)
        return 1
