"""A headless Chromium driven over the DevTools protocol (one websocket, websocket-client), for the
report's browser tests: open a file, evaluate JavaScript, click, record every network request,
take screenshots. Debian's `chromium` package is the browser (`apt-get install -y chromium`).
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((path for name in CHROMIUM if (path := shutil.which(name))), None)


class Browser:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 30.0):
        import websocket

        binary = find_chromium()
        if binary is None:
            raise RuntimeError("no chromium found (apt-get install -y chromium)")
        self.timeout, self.requests, self.errors, self._ids = timeout, [], [], itertools.count(1)
        self._profile = tempfile.TemporaryDirectory(prefix="b2tjax-chromium-")
        self._proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as reply:
            page = next(t for t in json.load(reply) if t["type"] == "page")
        # No Origin header: Chromium 111+ refuses a DevTools websocket whose Origin it was not told
        # to allow (--remote-allow-origins), and one without an Origin is not a browser page's.
        self._ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True
        )
        for method in ("Page.enable", "Network.enable", "Runtime.enable"):
            self.send(method)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "_ws", None) is not None:
            self._ws.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        # Chromium's helper processes can still write into the profile for a moment after the main
        # process exits (seen under load: "Directory not empty: 'Default'"): retry, then give up loudly.
        for _ in range(50):
            try:
                self._profile.cleanup()
                return
            except OSError:
                time.sleep(0.1)
        self._profile.cleanup()

    def _event(self, message: dict[str, Any]) -> None:
        """Record network requests and uncaught JavaScript errors."""
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])
        elif message.get("method") == "Runtime.exceptionThrown":
            self.errors.append(message["params"]["exceptionDetails"].get("text", "?"))

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a DevTools method and return its result (events seen meanwhile are recorded)."""
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self._event(message)

    def wait_for_event(self, method: str) -> dict[str, Any]:
        while True:
            message = json.loads(self._ws.recv())
            self._event(message)
            if message.get("method") == method:
                return message["params"]

    def open(self, path: Path) -> float:
        """Load a local file and wait for its load event; the seconds it took."""
        started = time.perf_counter()
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_for_event("Page.loadEventFired")
        return time.perf_counter() - started

    def eval(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression (promises awaited); a thrown error raises."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        """Poll a JavaScript expression until it is truthy; its value (RuntimeError on timeout)."""
        deadline = time.monotonic() + self.timeout
        while not (value := self.eval(expression)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {expression}")
            time.sleep(0.02)
        return value

    def screenshot(self, path: Path, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or the whole page), written to `path`."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        png = base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])
        path.write_bytes(png)
        return png
