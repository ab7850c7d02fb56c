"""The tables the plugin writes into an application's folder, `<logDir>/<application id>`: the driver's (every task
attempt, the calibration probes and TSC domains, the operators, the streaming batches, the rules' changes) and the
marker of a killed process in its executor's folder. Each is declared once, beside its writer in the plugin's Java
(its file name, folder, meaning, and columns with their Arrow types; jvm-plugin/.../spark/Tables.java lists them),
and the build writes the declarations into the plugin jar, where they are read here: a reader takes its file names
and schemas from here, never spelling them again. So are the names and metadata of the channels the analysis finds
among an application's records (the operators' sampled rows: `channel`)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import pyarrow as pa

from .plugin_jar import jar_json

DECLARATIONS = "io/cloudprofiler/spark/tables.json"
APPLICATION, EXECUTOR = "application", "executor"  # the folder a table lies in: the application's, an executor's


@dataclass(frozen=True)
class Table:
    """One table as the plugin declares it: `id` (the name this package looks it up by), `file`, `folder`
    (APPLICATION or EXECUTOR), `meaning` (what a row is) and `schema` (every column nullable)."""

    id: str
    file: str
    folder: str
    meaning: str
    schema: pa.Schema


@functools.cache
def tables() -> dict[str, Table]:
    """Every table the plugin declares, by id, in the jar's order."""
    return {t["id"]: Table(t["id"], t["file"], t["folder"], t["meaning"],
                           pa.schema([(c["name"], pa.type_for_alias(c["type"])) for c in t["columns"]]))
            for t in jar_json(DECLARATIONS)["tables"]}


@dataclass(frozen=True)
class Channel:
    """Channels the plugin writes, as it declares them: `id`, the `prefix` of their names, `event` (their
    `spark.event` metadata), `keys` (metadata keys by the ids the declaration gives them), `kinds` (the kinds of
    TSC their records carry, in the declaration's order, each with whether its latency is bounded) and `kinds_from`
    (each kind's moment in the words a latency is counted from: "emission")."""

    id: str
    prefix: str
    event: str
    keys: dict
    kinds: dict
    kinds_from: dict


@functools.cache
def channels() -> dict[str, Channel]:
    """Every kind of channel the plugin declares, by id."""
    return {id: Channel(id, c["prefix"], c["event"], dict(c["keys"]), {k["name"]: k["bounded"] for k in c["kinds"]},
                        {k["name"]: k["from"] for k in c["kinds"]})
            for id, c in jar_json(DECLARATIONS)["channels"].items()}


def channel(id: str) -> Channel:
    """The channels declared as `id` (e.g. "operator_rows"); a KeyError names the ids there are."""
    try:
        return channels()[id]
    except KeyError:
        raise KeyError(f"{id!r} is no channel of the plugin's: expected one of {', '.join(channels())}") from None


@functools.cache
def files() -> dict[str, str]:
    """Other files the plugin finds in an application's folder, by id: "report", the full report's copy that the
    Spark UI's Cloudprofiler tab offers for download."""
    return dict(jar_json(DECLARATIONS)["files"])


def table(id: str) -> Table:
    """The table declared as `id`; a KeyError names the ids there are."""
    try:
        return tables()[id]
    except KeyError:
        raise KeyError(f"{id!r} is no table of the plugin's: expected one of {', '.join(tables())}") from None


def file(id: str) -> str:
    """The file name of table `id` (e.g. "tasks": spark-tasks.arrows)."""
    return table(id).file


def of_file(name: str) -> "Table | None":
    """The table whose file is named `name`, None for any other file."""
    return next((t for t in tables().values() if t.file == name), None)


def app_folder(log_dir: str, app_id: str) -> str:
    """`<logDir>/<application id>` (logDir's trailing slashes dropped, as the plugin's Config.appFolder drops
    them: an object store takes "a//b" for another key than "a/b")."""
    return f"{log_dir.rstrip('/')}/{app_id}"
