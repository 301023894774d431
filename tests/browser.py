"""Headless Chromium for the report's browser tests, driven over the DevTools protocol.

``chromium --window-size`` cannot lay a page out narrower than 500 px (a desktop window's
minimum; a 390 px screenshot of it is a crop), so a phone width is emulated the way the
browser's own device mode does it: ``Emulation.setDeviceMetricsOverride`` over the
DevTools websocket (aiohttp, already a dependency). :func:`render` loads a page at a
width, runs a script in it, returns what the script returns and writes a PNG.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _flags(profile: Path) -> list[str]:
    assert CHROMIUM is not None
    # A throwaway profile, no sandbox (tests may run as root), nothing from the network.
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--no-first-run",
    ]


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium once with ``args`` (``--dump-dom URL``, ``--screenshot``)."""
    return subprocess.run(
        [*_flags(cwd / "profile"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


class _Session:
    """One page's DevTools websocket: commands by id, events kept until asked for."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.ids, self.events = ws, itertools.count(1), []  # type: ignore[var-annotated]

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        i = next(self.ids)
        await self.ws.send_json({"id": i, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json()
            if message.get("id") == i:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message.get("method"))

    async def event(self, method: str) -> None:
        while method not in self.events:
            self.events.append((await self.ws.receive_json()).get("method"))


async def _render(port: int, url: str, width: int, script: str, png: Path) -> Any:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as listing:
            targets = await listing.json()
        page = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            tab = _Session(ws)
            # mobile: the page's <meta name="viewport"> applies, as on a phone.
            await tab.send(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=2000,
                deviceScaleFactor=1,
                mobile=width < 600,
            )
            await tab.send("Page.enable")
            await tab.send("Page.navigate", url=url)
            await tab.event("Page.loadEventFired")
            value = await tab.send(
                "Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True
            )
            if "exceptionDetails" in value:
                raise RuntimeError(f"the script failed: {value['exceptionDetails']}")
            shot = await tab.send("Page.captureScreenshot", format="png")
            png.write_bytes(base64.b64decode(shot["data"]))
            return value["result"].get("value")


def render(url: str, width: int, script: str, png: Path) -> Any:
    """Load ``url`` ``width`` CSS pixels wide, return what ``script`` evaluates to (JSON
    values; a promise is awaited) and write a screenshot of what the window then shows to
    ``png`` (the top of the page, or the section a ``#anchor`` in ``url`` scrolled to)."""
    profile = png.parent / f"profile-{png.stem}"
    port_file = profile / "DevToolsActivePort"
    browser = subprocess.Popen(
        [*_flags(profile), "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert browser.poll() is None, "Chromium exited before it listened"
            assert time.monotonic() < deadline, "Chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        return asyncio.run(asyncio.wait_for(_render(port, url, width, script, png), 120))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


def ink(png: Path) -> Any:
    """Which pixels of a screenshot differ from the page's white background (a boolean
    array, rows by columns): a blank capture has none. Reads PNGs with matplotlib."""
    from matplotlib.image import imread

    rgb = imread(png)[..., :3]
    return (rgb < 0.96).any(axis=2)
