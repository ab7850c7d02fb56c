"""The demo's progress: each line with the time since the demo began; a phase that fails is one line (its traceback
goes to a file) and the demo goes on with what it has."""
from __future__ import annotations

import contextlib
import sys
import time
import traceback
from pathlib import Path


class Progress:
    def __init__(self, errors_file: Path, out=sys.stdout):
        self.start = time.monotonic()
        self.errors_file = Path(errors_file)
        self.out = out
        self.failed: list[str] = []

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f} s] {text}", file=self.out, flush=True)

    def detail(self, text: str) -> None:
        """A line under the current phase."""
        self.say(f"    {text}")

    @contextlib.contextmanager
    def phase(self, name: str, what: str):
        """Runs the body as phase `name`; an exception in it ends the phase with one line, not the demo."""
        began = time.monotonic()
        self.say(f"{name}: {what}")
        try:
            yield
        except Exception as exc:  # one phase's failure is reported and the demo goes on
            self.failed.append(name)
            self.errors_file.parent.mkdir(parents=True, exist_ok=True)
            with self.errors_file.open("a") as f:
                f.write(f"--- {name}\n{traceback.format_exc()}\n")
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            self.say(f"{name} FAILED after {time.monotonic() - began:.1f} s: {type(exc).__name__}: {first} "
                     f"(traceback in {self.errors_file})")
        else:
            self.say(f"{name}: done in {time.monotonic() - began:.1f} s")
