"""A page loaded in Debian's headless chromium, driven through the Chrome DevTools protocol: what the console
said, which requests went out or failed, what each figure drew, and a screenshot.

Chromium runs with a proxy that leads nowhere, so a page that fetched anything from the network would show a
failed request even on a machine that is online.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Per figure of the page: its size, and its marks that carry colour (data; axes, ticks and text are grey or black)
# or are embedded images (rasterized marks), each with a non-empty box.
FIGURES_JS = """
Array.from(document.querySelectorAll('figure.plot')).map(f => {
  const svg = f.querySelector('svg'); const box = svg.getBoundingClientRect();
  const coloured = c => { const m = (c || '').match(/rgba?\\(([\\d.]+), ([\\d.]+), ([\\d.]+)(?:, ([\\d.]+))?/);
    return m && (m[4] === undefined || +m[4] > 0)
      && Math.max(+m[1], +m[2], +m[3]) - Math.min(+m[1], +m[2], +m[3]) > 40; };
  let marks = 0;
  for (const e of svg.querySelectorAll('path, rect, use, polygon, polyline')) {
    const s = getComputedStyle(e); const b = e.getBoundingClientRect();
    if ((coloured(s.fill) || coloured(s.stroke)) && b.width * b.height > 0) marks++;
  }
  const images = Array.from(svg.querySelectorAll('image')).filter(i =>
    (i.getAttribute('xlink:href') || i.getAttribute('href') || '').length > 1000).length;
  return {key: f.dataset.plot, width: box.width, height: box.height, marks: marks + images};
})
"""


@dataclass
class Loaded:
    console_errors: list = field(default_factory=list)
    requests: list = field(default_factory=list)  # every URL the page asked for
    failed_requests: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    sections: list = field(default_factory=list)  # ids of the page's sections, in order
    text: str = ""  # document.body.innerText
    screenshot: bytes = b""


class _DevTools:
    def __init__(self, url: str):
        import websocket

        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout} s")
            self.events.append(json.loads(self.ws.recv()))


def _devtools_port(profile: Path, process: subprocess.Popen) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"chromium did not start its DevTools endpoint (exit {process.poll()})")
        time.sleep(0.1)
    return int(marker.read_text().split()[0])


def load(page: "Path | str", profile: Path, width: int = 1280, screenshot_height: int = 1500) -> Loaded:
    """Open `page` (a file, or a URL of this machine's loopback) in a fresh headless chromium with its own profile
    folder; return what it saw."""
    # nothing is reached over the network but a page given by its URL, and only at its own host and port
    bypass = "<-loopback>" + (f";{urllib.parse.urlparse(page).netloc}" if isinstance(page, str) else "")
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--remote-debugging-port=0",
         "--remote-allow-origins=*", f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9",
         f"--proxy-bypass-list={bypass}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _devtools_port(profile, process)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            target = next(t for t in json.load(reply) if t["type"] == "page")
        tools = _DevTools(target["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.send(f"{domain}.enable")
        tools.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        tools.send("Page.navigate", url=page if isinstance(page, str) else page.resolve().as_uri())
        tools.wait_for("Page.loadEventFired")
        result = Loaded()
        result.figures = tools.send("Runtime.evaluate", expression=FIGURES_JS, returnByValue=True)["result"]["value"]
        result.sections = tools.send("Runtime.evaluate", returnByValue=True, expression=(
            "Array.from(document.querySelectorAll('main > section')).map(s => s.id)"))["result"]["value"]
        result.text = tools.send("Runtime.evaluate", expression="document.body.innerText",
                                 returnByValue=True)["result"]["value"]
        shot = tools.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": screenshot_height, "scale": 1})
        result.screenshot = base64.b64decode(shot["data"])
        for event in tools.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                result.console_errors.append(params.get("args"))
            elif method == "Runtime.exceptionThrown":
                result.console_errors.append(params.get("exceptionDetails"))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                result.console_errors.append(params["entry"].get("text"))
            elif method == "Network.requestWillBeSent":
                result.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                result.failed_requests.append(params)
        tools.ws.close()
        return result
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
