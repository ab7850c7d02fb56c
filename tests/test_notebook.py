"""In a notebook: a real one, written here and executed by nbclient on a local Jupyter kernel (ipykernel), with a Spark
session and the plugin in the kernel. `cps.live(spark)` shows a summary that a daemon thread refreshes while a job
runs and that stops with the session; `cps.report(spark)` returns the page's path, which the notebook shows inline
as the page itself."""
import html
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient

from cloudprofiler.analysis.report.notebook import FRAME_BASE

SLOW_PARTITION, SLOW_S, TASK_S = 3, 5.0, 1.0

SETUP = """
import time
import cloudprofiler.spark as cps
spark = (cps.builder(log_dir={log_dir!r}, local_dir={local_dir!r}, collect_interval_seconds=1).master("local[2]")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).count()  # the Python workers start here, not in the job
"""
LIVE = "summary = cps.live(spark, interval_s=1)"
JOB = f"""
def work(x):
    time.sleep({SLOW_S} if x == {SLOW_PARTITION} else {TASK_S})
    return x
spark.sparkContext.parallelize(range(8), 8).map(work).sum()
"""
REPORT = "page = cps.report(spark, output={page!r})\npage"
STOP = "spark.stop()\ntime.sleep(3)\nprint('refreshing:', summary.running)"


class RecordingClient(NotebookClient):
    """Keeps each display message the kernel sent, with the cell being run when it came."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.displays = []  # (cell index, message type, display id, text/plain)

    def process_message(self, msg, cell, cell_index):
        if msg["msg_type"] in ("display_data", "update_display_data"):
            content = msg["content"]
            self.displays.append((cell_index, msg["msg_type"], content.get("transient", {}).get("display_id"),
                                  content["data"].get("text/plain", "")))
        return super().process_message(msg, cell, cell_index)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    page = folder / "report.html"
    nb = nbformat.v4.new_notebook()
    sources = [SETUP.format(log_dir=str(folder / "logs"), local_dir=str(folder / "local")), LIVE, JOB,
               REPORT.format(page=str(page)), STOP]
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    client = RecordingClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(folder)}})
    began = time.monotonic()
    client.execute()
    nbformat.write(nb, folder / "executed.ipynb")  # a notebook file like any other, for a look at a failure
    return {"nb": nb, "displays": client.displays, "page": page, "seconds": time.monotonic() - began}


def test_the_live_summary_refreshes_while_a_job_runs(executed):
    displays = executed["displays"]
    [(_, _, display_id, first)] = [d for d in displays if d[1] == "display_data" and d[0] == 1]
    assert display_id and first.startswith("Cloudprofiler · ")
    during_job = [text for cell, kind, shown, text in displays
                  if cell == 2 and kind == "update_display_data" and shown == display_id]
    assert len(set(during_job)) >= 2, during_job  # updated at least twice, each time with something new
    progress = [re.search(r"running: stage \d+ \(.*\): (\d) of 8 tasks done", text) for text in during_job]
    assert any(match and int(match[1]) < 8 for match in progress), during_job
    later = [text for cell, kind, shown, text in displays if cell > 2 and shown == display_id]
    final = next(text for text in later if "stage 1: 8 tasks" in text)  # the job's stage, after the warm-up's
    # Spark's times, launch to finish, on a machine that may be loaded
    stage = re.search(rf"stage 1: 8 tasks, median ([\d.]+) s, slowest ([\d.]+) s \(partition {SLOW_PARTITION} on "
                      r"executor driver\), \d stragglers? \(over 1.5x the median\)", final)
    assert stage and TASK_S <= float(stage[1]) < SLOW_S / 2 and float(stage[2]) >= SLOW_S, final


def test_the_live_summary_stops_with_the_session(executed):
    stop = executed["nb"].cells[4]
    assert "refreshing: False" in "".join(o.get("text", "") for o in stop.outputs)
    [shown] = executed["nb"].cells[1].outputs  # the display, as its last update left it
    text = shown["data"]["text/plain"]
    assert re.match(r"Cloudprofiler · \S+ · stopped at \d\d:\d\d:\d\d: the session stopped", text), text
    finished = int(re.search(r"task attempts finished: ([\d,]+)", text)[1].replace(",", ""))
    assert finished >= 2 + 8 and "stage 1: 8 tasks" in text  # the warm-up, the job and the report's analysis
    assert "the session stopped" in shown["data"]["text/html"]


def test_the_report_shows_inline_as_the_page_it_wrote(executed):
    [result] = [o for o in executed["nb"].cells[3].outputs if o["output_type"] == "execute_result"]
    assert result["data"]["text/plain"].endswith(f"{str(executed['page'])!r})")  # still the file's path
    frame = result["data"]["text/html"]
    shown = html.unescape(re.search(r'<iframe [^>]*srcdoc="([^"]*)"', frame)[1])
    written = executed["page"].read_text()
    assert shown == written.replace("<head>", "<head>" + FRAME_BASE, 1)  # the whole page, nothing fetched
    findings = shown.split('<ol class="findings">')[1].split("</ol>")[0]
    assert re.search(rf"partition {SLOW_PARTITION} took \d+\.\dx", findings), findings
