"""The MLflow UI as a person sees it: a real `tvr ui` over a real smoke run, opened in
Debian's Chromium through Playwright (nothing downloaded). Skipped where either is absent;
`.ci/run` installs Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.prestart import Process

CHROMIUM = os.environ.get("TVR_CHROMIUM") or shutil.which("chromium") \
    or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (pip install -e '.[dev]')")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None,
                                 reason="no Chromium here (Debian: apt-get install chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tvr(*args: str, **kwargs) -> Process:  # noqa: ANN003
    """A real `tvr` process, forked pre-imported (tests/prestart.py)."""
    return Process(list(args), **kwargs)


def _runs_link(ui: Process, timeout_s: float = 120) -> str:
    """The runs-table link `tvr ui` prints for suite smoke."""
    deadline = time.monotonic() + timeout_s
    assert ui.stdout is not None
    while time.monotonic() < deadline:
        line = ui.stdout.readline()
        if not line:
            pytest.fail(f"tvr ui exited ({ui.poll()}) before printing the link")
        if "runs of smoke:" in line:
            return line.split("runs of smoke:", 1)[1].strip()
    pytest.fail("tvr ui printed no link for smoke")


def test_runs_table_shows_the_parent_and_named_children(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run = _tvr("run", "smoke", "--only", "lstm", "--min-run-time", "0.01", "--out", str(out))
    assert run.wait(timeout=600) == 0
    port = _free_port()
    ui = _tvr("ui", "--port", str(port), "--out", str(out), stdout=subprocess.PIPE, text=True)
    try:
        link = _runs_link(ui)
        assert link.startswith(f"http://127.0.0.1:{port}/#/experiments/")
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])  # root in CI has no sandbox
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            deadline = time.monotonic() + 60
            while True:  # the server answers a few seconds after printing the link
                try:
                    page.goto(link)
                    break
                except sync_api.Error:
                    assert time.monotonic() < deadline, "the UI did not answer within 60 s"
                    time.sleep(0.5)
            name = page.locator("[role=gridcell][col-id='attributes.`Run Name`']")
            parent = name.filter(has_text="smoke 20").first
            parent.wait_for(timeout=60_000)  # the runs table, not the GenAI overview
            parent.locator("button").first.click()  # nested runs open under their parent
            for child in ("lstm seq_len=16 d_model=32", "lstm seq_len=64 d_model=32"):
                name.filter(has_text=child).first.wait_for(timeout=30_000)
            page.screenshot(path=str(tmp_path / "runs-table.png"))
            browser.close()
    finally:
        ui.terminate()
        ui.wait(timeout=30)
