"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): real, trusted
key presses (Tab, Enter) on a page, and its state read back. Nothing listens on a port; the standard library only.

Messages are JSON, each ended by a NUL byte: Chromium reads commands on its fd 3 and writes replies and events
on its fd 4.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]
KEYS = {"Tab": 9, "Enter": 13}


class Browser:
    """One Chromium with one page; use as a context manager."""

    def __init__(self, profile: Path) -> None:
        to_chrome, self._out = os.pipe()
        self._in, from_chrome = os.pipe()
        # the shell puts the pipe ends where Chromium expects them (3: commands in, 4: replies out), then execs it
        place = f'exec "$0" "$@" 3<&{to_chrome} 4>&{from_chrome}'
        self.proc = subprocess.Popen(
            [
                "/bin/bash",
                "-c",
                place,
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            pass_fds=(to_chrome, from_chrome),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id, self.session = b"", 0, ""

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._out)
        os.close(self._in)

    def call(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        """Send one command (to the page's session unless ``session`` is False) and wait for its reply."""
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def open(self, url: str) -> None:
        """Open ``url`` in a new page and attach to it; returns once its document has loaded."""
        target = self.call("Target.createTarget", session=False, url=url)["targetId"]
        self.session = self.call(
            "Target.attachToTarget", session=False, targetId=target, flatten=True
        )["sessionId"]
        self.call(
            "Emulation.setFocusEmulationEnabled", enabled=True
        )  # a headless page still takes key focus
        for _ in range(
            2000
        ):  # each evaluate is a round trip to the renderer: wait for the load, not for a time
            if self.evaluate("document.readyState") == "complete":
                return
        raise RuntimeError(f"{url} did not finish loading")

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)[
            "result"
        ].get("value")

    def press(self, key: str) -> None:
        """A trusted key press, as from a keyboard."""
        code = KEYS[key]
        text = {"Enter": "\r"}.get(key, "")
        self.call(
            "Input.dispatchKeyEvent",
            type="keyDown",
            key=key,
            code=key,
            windowsVirtualKeyCode=code,
            text=text,
        )
        self.call(
            "Input.dispatchKeyEvent", type="keyUp", key=key, code=key, windowsVirtualKeyCode=code
        )
