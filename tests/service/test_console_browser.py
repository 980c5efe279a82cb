"""The console in a real browser (Debian's chromium and chromium-driver, headless, driven by Selenium) against a real
`tailtune serve` (uvicorn with `service.server.server_config`) on 127.0.0.1, a real worker, a real memcached and
Spark local: sign in → upload a bad trace and read its line errors → upload a good trace → start a nightly job
and watch it finish → open its analysis → publish a config version → roll back → a form without its CSRF token
is refused → sign out; a read token sees no write control. A second, shorter test (no Spark) has a verify roll a
version back and reads the overview, the confirmations and the expected-vs-observed figure after it. Every page is
saved as a screenshot (laptop and phone widths) under `TAILTUNE_TEST_ARTIFACTS` (default: this test's tmp dir)
to look at.

~2–3 minutes (Spark start, a 4-trial tune): `make test` sets TAILTUNE_E2E=1 so CI runs it; a bare pytest run
skips it unless you set it:

    TAILTUNE_E2E=1 .venv/bin/python -m pytest tests/service/test_console_browser.py -q
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from base.settings import Settings, get_settings
from control.db import Database, database_for
from kinds.memcached.publisher import MemcachedPublisher
from service.auth import create_token
from tests.app_fixtures import FAST_ENV
from tests.servers.memcached_server import MemcachedNode
from tests.servers.tailtune_service import serving

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("TAILTUNE_E2E") != "1", reason="set TAILTUNE_E2E=1 (about 2–3 minutes)"),
]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: How long the nightly job may take in the browser test (Spark start and a 4-trial tune take about a minute).
JOB_WAIT_S = 420.0
LAPTOP, PHONE = (1366, 900), (390, 844)


@dataclass
class Live:
    base: str
    settings: Settings
    db: Database
    write: str
    read: str
    memcached: MemcachedNode
    home: Path


@pytest.fixture
def live(
    tailtune_home: Path, memcached_node: MemcachedNode, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Live]:
    """`tailtune serve` (uvicorn, the server config the CLI runs) on a free 127.0.0.1 port and a worker, in threads."""
    from jobs.handlers import default_handlers
    from jobs.worker import Worker
    from service.server import server_config

    for k, v in {**FAST_ENV, "TAILTUNE_SPARK_MASTER": "local[2]", "TAILTUNE_WORKER_POLL_S": "0.2"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    get_settings.cache_clear()
    settings = get_settings()
    db = database_for(settings.resolved_database_url)
    write, read = create_token(db, "operator", "write"), create_token(db, "viewer", "read")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    stop = threading.Event()
    worker = Worker(settings, db, "browser-test", handlers=default_handlers(), schedule=False)
    working = threading.Thread(target=worker.run, kwargs={"stop": stop}, daemon=True)
    try:
        with serving(server_config(settings, host="127.0.0.1", port=port, log_level="warning"), sockets=[sock]):
            working.start()
            try:
                yield Live(f"http://127.0.0.1:{port}", settings, db, write, read, memcached_node, tailtune_home)
            finally:
                stop.set()
                working.join(timeout=60)
    finally:
        sock.close()
        db.dispose()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where the screenshots go: TAILTUNE_TEST_ARTIFACTS (kept after the run), else the test's tmp dir."""
    root = Path(os.environ.get("TAILTUNE_TEST_ARTIFACTS") or tmp_path / "artifacts") / "console"
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("the browser test needs Debian's chromium and chromium-driver: run scripts/setup.sh "
                    "(apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={LAPTOP[0]},{LAPTOP[1]}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


class Pages:
    """The browser, with the steps a person takes and the checks a person makes."""

    def __init__(self, driver: Any, base: str, shots: Path) -> None:
        from selenium.webdriver.common.by import By

        self.d, self.base, self.shots, self.By = driver, base, shots, By
        self.count = 0
        self.console_errors: list[str] = []

    # --- reading -----------------------------------------------------------------------------------------------
    def go(self, path: str) -> None:
        self.d.get(self.base + path)
        self.settle()

    def reload(self, path: str) -> bool:
        """Load a page again (a page without live parts shows a finished publish only when reloaded)."""
        self.go(path)
        return True

    def settle(self) -> None:
        """Wait for the page's scripts to have run (htmx and plotly load deferred) and keep the console log."""
        self.wait(lambda: self.d.execute_script("return document.readyState") == "complete", 20, "page load")
        self.read_log()

    def read_log(self) -> None:
        """Keep the browser's errors (a script error, a refused load), with the page they happened on."""
        for entry in self.d.get_log("browser"):
            if entry["level"] == "SEVERE":
                self.console_errors.append(f"{self.d.current_url}: {entry['message']}")

    def css(self, selector: str) -> Any:
        return self.d.find_element(self.By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[Any]:
        return list(self.d.find_elements(self.By.CSS_SELECTOR, selector))

    def text(self, selector: str = "main") -> str:
        return str(self.css(selector).text)

    def wait(self, ok: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll until `ok()` is truthy (the page updates itself through htmx); fail naming `what`."""
        from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                got = ok()
                if got:
                    return got
            except (StaleElementReferenceException, WebDriverException) as exc:
                last = exc
            time.sleep(0.25)
        self.shot(f"timeout-{what.replace(' ', '-')}")
        raise AssertionError(f"waited {timeout:g} s for {what}; page: {self.d.current_url}\n{self.text('body')[:3000]}"
                             + (f"\nlast error: {last}" if last else ""))

    def shot(self, name: str, *, phone: bool = False) -> Path:
        """A screenshot of the whole page at laptop or phone width (the phone's viewport emulated: its width,
        touch, the mobile layout). The viewport is grown to the page's height first and the figures given time to
        lay out for it, so the picture is what a person scrolling the page sees."""
        import base64

        width, height = PHONE if phone else LAPTOP

        def emulate(h: int) -> None:
            self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": width, "height": h, "deviceScaleFactor": 1, "mobile": phone})

        emulate(height)
        try:
            if phone:  # drawn as a phone draws it (its figures lay out for its width when the page loads)
                self.d.refresh()
                self.settle()
            time.sleep(0.8)  # the figures follow the new width
            full = int(self.d.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]["height"])
            full = min(max(full, height), 12000)
            emulate(full)
            time.sleep(0.8)
            clip = {"x": 0, "y": 0, "width": width, "height": full, "scale": 1}
            png = self.d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": clip})
        finally:
            self.d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            self.d.execute_script("window.dispatchEvent(new Event('resize'))")
            self.read_log()
        self.count += 1
        path = self.shots / f"{self.count:02d}-{name}{'-phone' if phone else ''}.png"
        path.write_bytes(base64.b64decode(png["data"]))
        return path

    # --- acting ------------------------------------------------------------------------------------------------
    def click(self, selector: str) -> None:
        """Click something that changes the page in place (a disclosure, a scripted form)."""
        el = self.css(selector)
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
        el.click()
        self.settle()

    def submit(self, selector: str) -> None:
        """Click something that loads another page (a form's post, a link) and wait for that page: the click
        returns before the server has answered, while the old page still reads as loaded."""
        from selenium.common.exceptions import StaleElementReferenceException

        old = self.css("html")

        def gone() -> bool:
            try:
                old.tag_name  # noqa: B018 - touching the old document fails once it is replaced
            except StaleElementReferenceException:
                return True
            return False

        self.click(selector)
        self.wait(gone, 60, f"the page after {selector}")
        self.settle()

    def fill(self, selector: str, value: str) -> None:
        el = self.css(selector)
        el.clear()
        el.send_keys(value)

    def choose(self, selector: str, label: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.css(selector)).select_by_visible_text(label)

    def sign_in(self, token: str) -> None:
        self.go("/")
        assert "/login" in self.d.current_url, "a page without a session goes to the sign-in page"
        self.fill("#token", token)
        self.submit("#sign-in")
        self.wait(lambda: "/login" not in self.d.current_url, 10, "sign-in")

    def sign_out(self) -> None:
        self.submit("#sign-out")
        self.wait(lambda: "/login" in self.d.current_url, 10, "sign-out")

    def post_without_csrf(self, path: str, fields: dict[str, str]) -> tuple[int, str]:
        """A same-origin form post from this page's context, its cookies sent, without the CSRF token."""
        got = self.d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[0], {method: 'POST', body: new URLSearchParams(arguments[1]), redirect: 'manual'})"
            ".then(r => r.text().then(t => done([r.status, t]))).catch(e => done([0, String(e)]));",
            path, fields,
        )
        return int(got[0]), str(got[1])


def _generate(home: Path, out: Path, requests: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "tailtune", "generate", "-p", "facebook", "-n", str(requests), "-o", str(out)],
        check=True, capture_output=True, env={**os.environ, "TAILTUNE_HOME": str(home)},
    )


def _api(live: Live, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    import httpx

    r = httpx.request(method, f"{live.base}/api/v1{path}", json=body,
                      headers={"Authorization": f"Bearer {live.write}"}, timeout=30)
    assert r.status_code < 300, r.text
    return r.json() if r.content else None


def _report(live: Live, deployment_id: int, version: int, start: float, latencies_ms: list[float]) -> None:
    """What a `tailtune_client` reports for one window (schema tailtune.client.observations/1: log10 buckets, 20
    per decade from 1 µs)."""
    import math

    counts: dict[int, int] = {}
    for ms in latencies_ms:
        bucket = math.floor(20 * math.log10(ms * 1000.0)) + 1
        counts[bucket] = counts.get(bucket, 0) + 1
    hist = {"scheme": "log10", "buckets_per_decade": 20, "count": len(latencies_ms),
            "sum_us": sum(latencies_ms) * 1000.0, "min_observed_us": min(latencies_ms) * 1000.0,
            "max_observed_us": max(latencies_ms) * 1000.0, "counts": sorted(counts.items())}
    _api(live, "POST", f"/deployments/{deployment_id}/observations", {
        "schema": "tailtune.client.observations/1", "deployment_id": deployment_id, "client": {"id": "shop-web-1"},
        "window": {"start": start, "end": start + 600.0},
        "observations": [{"config_version": version, "all": hist}],
    })


def test_console_flow_in_a_real_browser(live: Live, browser: Any, artifacts: Path, tmp_path: Path) -> None:
    p = Pages(browser, live.base, artifacts)
    dep = _api(live, "POST", "/deployments", {
        "name": "shop-cache", "kind": "memcached", "timezone": "Europe/Berlin",
        "topology": {"servers": 4, "slots": 4}, "connection": {"servers": [live.memcached.address]},
        "current_config": {"policy": "batching", "params": {}},
    })
    # two config versions an operator added by hand (the nightly job may add more): publish and roll back work on
    # them whatever the tuner decides
    _api(live, "POST", f"/configs/{dep['id']}/versions", {"config": {"policy": "batching", "params": {}},
                                                          "note": "as deployed", "publish": False})
    chisel = {"policy": "chisel", "params": {"split_keys": 8, "merge": 2, "elephant_threshold": 50}}
    _api(live, "POST", f"/configs/{dep['id']}/versions", {"config": chisel, "note": "try chisel", "publish": False})
    bad = tmp_path / "bad.csv"
    bad.write_text("request_id,ts,key,value_size,op\n1,0.5,k1,10,get\n2,notanumber,k2,x,get\n,1.5,k3,5,get\n")
    good = tmp_path / "shop.csv"
    _generate(live.home, good, 1000)

    # --- sign in -----------------------------------------------------------------------------------------------
    p.go("/")
    assert "/login" in browser.current_url
    p.shot("sign-in")
    p.sign_in(live.write)
    assert "shop-cache" in p.text() and "Signed in as operator" in p.text("#flash")
    p.shot("overview-empty")

    # --- a bad trace: its line errors, readable --------------------------------------------------------------------
    p.go("/traces")
    p.css("#upload-file").send_keys(str(bad))
    p.choose("#upload-deployment", "shop-cache (memcached)")
    p.click("#upload-submit")
    p.wait(lambda: "Uploaded bad.csv" in p.text("#upload-status"), 30, "the upload to finish")
    problems = p.wait(lambda: p.all("[id$='-problems']"), 60, "the failed ingest's problems")
    listed = problems[0].text
    assert "bad.csv:3 field ts: expected a number" in listed, listed
    assert "bad.csv:3 field value_size" in listed and "bad.csv:4 field request_id: missing value" in listed, listed
    p.shot("trace-errors")

    # --- a good trace: ingested ----------------------------------------------------------------------------------
    p.css("#upload-file").send_keys(str(good))
    p.choose("#upload-deployment", "shop-cache (memcached)")
    p.click("#upload-submit")
    p.wait(lambda: "Uploaded shop.csv" in p.text("#upload-status"), 30, "the good upload")
    p.wait(lambda: "ready" in p.text("#trace-list tbody tr:first-child"), 120, "the good trace to be ingested")
    p.shot("traces")
    p.shot("traces", phone=True)

    # --- start a nightly job and watch it finish --------------------------------------------------------------------
    p.go(f"/deployments/{dep['id']}")
    p.click("#run-now summary")
    p.fill("#run-trials", "4")
    p.fill("#run-seeds", "1")
    p.css("#run-publish").click()  # keep it from publishing what it accepts: the versions above stay in charge
    p.submit("#run-submit")
    assert "/jobs/" in browser.current_url
    job_id = int(browser.current_url.rstrip("/").rsplit("/", 1)[1])
    p.wait(lambda: "running" in p.text("#job-live") or "succeeded" in p.text("#job-live"), 60, "the job to start")
    p.shot("job-running")
    p.wait(lambda: p.all("#job-live .badge.s-succeeded") or p.all("#job-live .badge.s-failed"), JOB_WAIT_S,
           "the nightly job to end")
    p.settle()
    assert p.all("#job-live > p .s-succeeded"), p.text("#job-live")
    steps = p.text("#job-steps")
    for step in ("ingest", "analyze", "tune", "decide"):
        assert step in steps
    assert p.wait(lambda: p.all("#main .plot .main-svg"), 20, "Optuna's figures")
    p.shot("job-done")

    # --- its analysis ------------------------------------------------------------------------------------------
    p.submit("#open-analysis")
    assert browser.current_url.endswith(f"/jobs/{job_id}/analysis")
    assert len(p.all("#findings li")) >= 3, p.text()
    assert p.wait(lambda: len(p.all(".plot .main-svg")) >= 3, 20, "the analysis figures")
    assert "Multiget sizes" in p.text()
    p.shot("analysis")
    p.shot("analysis", phone=True)

    # --- the deployment: evidence, model, versions; publish, then roll back ----------------------------------------
    p.go(f"/deployments/{dep['id']}")
    assert "From nightly job" in p.text() and p.all("#cdf .main-svg"), p.text()
    assert "worker_threads" in p.text("#model-table")
    p.shot("deployment")
    p.shot("deployment", phone=True)
    newest = max(int(b.get_attribute("id").split("-")[1]) for b in p.all("button[id^='publish-']"))
    p.click(f"#ask-publish-{newest}")  # the publish asks first, naming the servers
    assert live.memcached.address in p.text(f"#confirm-publish-{newest}")
    p.submit(f"#publish-{newest}")
    assert f"Publishing config version {newest}" in p.text("#flash")
    p.wait(lambda: p.reload(f"/deployments/{dep['id']}") and p.all(f"#v{newest} .s-running-now"), 60,
           f"version {newest} to be published")
    target = MemcachedPublisher("shop-cache", dep["connection"], 2.0)
    assert (target.read_current() or (0, {}))[0] == newest
    p.click("#ask-rollback-1")
    p.submit("#rollback-1")
    assert "Rolled back to version 1" in p.text("#flash")
    rolled = newest + 1
    p.wait(lambda: p.reload(f"/deployments/{dep['id']}") and p.all(f"#v{rolled} .s-running-now"), 60,
           "the rollback to be published")
    version, config = target.read_current() or (0, {})
    assert (version, config["policy"]) == (rolled, "batching")
    p.shot("deployment-rolled-back")

    # the application's clients report what they observe under each version: the overview draws it over time
    start = time.time() - 6 * 3600.0
    for i, version in enumerate(range(1, rolled + 1)):
        for k in range(2):  # the same latencies under every version: the verify below finds no regression
            spread = [0.2 + 0.01 * ((j * 37) % 100) for j in range(800)]
            _report(live, dep["id"], version, start + (2 * i + k) * 1200.0, spread)

    # --- verify the running version on what the clients reported ------------------------------------------------------
    p.go(f"/deployments/{dep['id']}")
    p.submit(f"#verify-{rolled}")
    assert f"Verifying config version {rolled}" in p.text("#flash")
    p.wait(lambda: p.all("#job-live > p .s-succeeded"), 60, "the verify job to end")
    outcome = p.text("#verify-outcome")
    assert outcome.startswith(f"Version {rolled}:") and "rolled back" not in outcome, outcome
    p.shot("verify-job")

    # --- a form post without its CSRF token is refused; nothing happens ----------------------------------------------
    status, body = p.post_without_csrf(f"/deployments/{dep['id']}/publish", {"version": "1"})
    assert status == 403 and "CSRF token is missing or wrong" in body, (status, body[:500])
    jobs_after = _api(live, "GET", f"/jobs?deployment_id={dep['id']}")
    assert not any(j["kind"] == "publish" and j["payload"].get("version") == 1 for j in jobs_after)

    p.go("/")
    assert "version " + str(rolled) in p.text() and "Last nightly" in p.text()
    assert p.wait(lambda: p.all(".spark .main-svg"), 20, "the expected vs observed figure")
    p.shot("overview")
    p.shot("overview", phone=True)
    p.go("/jobs")
    p.shot("jobs")
    p.go("/analyses")
    p.shot("analyses")

    # --- sign out; a read token sees no write control --------------------------------------------------------------
    p.sign_out()
    p.go(f"/deployments/{dep['id']}")
    assert "/login" in browser.current_url, "signed out: the pages ask for a token again"
    p.sign_in(live.read)
    p.go(f"/deployments/{dep['id']}")
    assert "read only" in p.text("header")
    for selector in ("form[action$='/publish']", "form[action$='/rollback']", "form[action$='/run']",
                     "form[action$='/discover']", "form[action^='/schedules']"):
        assert not p.all(selector), selector
    p.shot("deployment-read-only")
    p.go("/traces")
    assert not p.all("#upload-form") and not p.all("form[action='/analyses']")
    p.go(f"/jobs/{job_id}")
    assert not p.all("#cancel-job") and not p.all("#retry-job")
    status, body = p.post_without_csrf(f"/deployments/{dep['id']}/publish", {"version": "1"})
    assert status == 403 and "read scope" in body
    p.sign_out()

    refused = "/publish - Failed to load resource: the server responded with a status of 403"
    assert not [e for e in p.console_errors if refused not in e], p.console_errors  # only the two refusals above
    (artifacts / "screenshots.json").write_text(json.dumps(sorted(f.name for f in artifacts.glob("*.png"))))
    print(f"\nscreenshots: {artifacts}")


def test_the_model_on_your_cluster_in_a_real_browser(live: Live, browser: Any, artifacts: Path) -> None:
    """The deployment page's fidelity section drawn by the browser: first its empty state, then, with stored live
    replays (one contradicting the model), its figures drawn by plotly.js and its finding; no script error."""
    from control import fidelity_store
    from tests.control.fidelity_reports import report

    p = Pages(browser, live.base, artifacts)
    dep = _api(live, "POST", "/deployments", {
        "name": "staging-cache", "kind": "memcached", "connection": {"servers": [live.memcached.address]}})
    p.sign_in(live.read)
    p.go(f"/deployments/{dep['id']}")
    assert "No live replay of this deployment yet" in p.text("#fidelity")
    at = time.time() - 3 * 86400
    with live.db.session() as s:
        for i, (observed, predicted, cmp) in enumerate((
            ({"A": 10.0, "B": 8.0}, {"A": 9.0, "B": 7.5}, [("A", "B", "p99", -20.0, (-30.0, -10.0))]),
            ({"A": 10.0, "B": 12.0}, {"A": 9.0, "B": 8.0}, [("A", "B", "p99", 20.0, (5.0, 35.0))]),
            ({"A": 11.0, "B": 9.0}, {"A": 9.5, "B": 8.0}, [("A", "B", "p99", -18.0, (-28.0, -8.0))]),
        )):
            fidelity_store.record(s, dep["id"], report(at + i * 86400, observed, predicted, cmp,
                                                       notes=["fresh twins: a twin's histogram is not production's"],
                                                       deployment="staging-cache"), job_id=None, source="cli")
    p.go(f"/deployments/{dep['id']}")
    section = p.text("#fidelity")
    assert "ranked 2 of 3 resolved pairs" in section and "contradicted the model" in section
    for plot in ("#fid-error", "#fid-agreement-plot"):
        p.wait(lambda plot=plot: p.all(f"{plot} .main-svg"), 20, f"plotly to draw {plot}")  # type: ignore[misc]
    p.d.execute_script("document.getElementById('fidelity').scrollIntoView()")
    p.shot("deployment-fidelity")
    p.shot("deployment-fidelity", phone=True)
    assert not p.console_errors, p.console_errors


def test_a_verify_rollback_and_the_confirmations_in_a_real_browser(live: Live, browser: Any, artifacts: Path) -> None:
    """Version 1 published and reported fast, version 2 published through its confirmation and reported 5× slower,
    its verify (the console's button, the real worker and memcached) rolls it back: the overview and the
    deployment's header say which verify rolled back which version and that version 3 (version 1's config) runs;
    publishing the rolled-back version asks first and says so, and closing the question publishes nothing; the
    figure draws expected and observed on a log axis. No Spark: about half a minute."""
    p = Pages(browser, live.base, artifacts)
    dep = _api(live, "POST", "/deployments", {
        "name": "cart-cache", "kind": "memcached", "connection": {"servers": [live.memcached.address]},
        "current_config": {"policy": "batching", "params": {}}})
    for config in ({"policy": "batching", "params": {}},
                   {"policy": "chisel", "params": {"split_keys": 8, "merge": 2, "elephant_threshold": 50}}):
        _api(live, "POST", f"/configs/{dep['id']}/versions", {"config": config, "publish": False})
    target = MemcachedPublisher("cart-cache", dep["connection"], 2.0)
    page = f"/deployments/{dep['id']}"
    p.sign_in(live.write)
    start = time.time() - 8 * 3600.0
    for version, ms in ((1, 1.0), (2, 5.0)):
        p.go(page)
        assert not p.css(f"#publish-{version}").is_displayed(), "the publish button sits behind its question"
        p.click(f"#ask-publish-{version}")
        ask = p.text(f"#confirm-publish-{version}")
        assert f"On 1 server of cart-cache: {live.memcached.address}." in ask, ask
        if version == 2:
            assert "Changes from version 1, which runs now:" in ask and "policy: batching → chisel" in ask, ask
        p.shot(f"confirm-publish-{version}")
        p.submit(f"#publish-{version}")
        p.wait(lambda v=version: p.reload(page) and p.all(f"#v{v} .s-running-now"), 60,  # type: ignore[misc]
               f"version {version} to be published")
        # the verify horizon's windows (verify_after_windows), each 600 requests; both versions' windows at the
        # same times (clients on each, as under a canary): concurrent windows are compared as they are, so the
        # verdict does not hang on the live reference round trip of this shared machine (environment_changed)
        for k in range(6):
            spread = [ms * (0.5 + 0.01 * ((j * 37) % 100)) for j in range(600)]
            _report(live, dep["id"], version, start + k * 600.0, spread)
    assert (target.read_current() or (0, {}))[0] == 2

    # --- the verify finds version 2 worse: rolled back to version 1's config as version 3 ------------------------
    p.go(page)
    p.submit("#verify-2")
    p.wait(lambda: p.all("#job-live > p .s-succeeded"), 60, "the verify job to end")
    verify_job = int(browser.current_url.rstrip("/").rsplit("/", 1)[1])
    assert "rolled back" in p.text("#verify-outcome"), p.text("#verify-outcome")
    p.wait(lambda: p.reload(page) and p.all("#v3 .s-running-now"), 60, "the rollback version 3 to be published")
    version, config = target.read_current() or (0, {})
    assert (version, config["policy"]) == (3, "batching")

    for where in ("/", page):
        p.go(where)
        facts = p.text(f"#loop-{dep['id']}")
        assert f"version 2, by verify job {verify_job}" in facts, facts
        assert "Version 3 brought back the config of version 1 and runs now." in facts, facts
        assert "version 3: batching" in facts and "the config of version 1, back after version 2" in facts, facts
        verify_line = p.text(f"#loop-{dep['id']} .verify-now")
        assert verify_line.startswith("version 3"), verify_line  # the running version's check, not the rolled back's
        assert p.wait(lambda: p.all(".plot .main-svg"), 20, "the expected vs observed figure")
        plot = "spark-" + str(dep["id"]) if where == "/" else "timeline"
        axis = p.d.execute_script(f"return document.getElementById('{plot}').layout.yaxis.type")
        assert axis == "log", axis
        p.shot("rolled-back-overview" if where == "/" else "rolled-back-deployment")
    p.go("/")
    p.shot("rolled-back-overview", phone=True)

    # --- publishing the rolled-back version asks first and says so; closing the question publishes nothing --------
    p.go(page)
    assert "(rolled back)" in p.text("#ask-publish-2") and "(rolled back)" not in p.text("#ask-publish-1")
    p.click("#ask-publish-2")
    ask = p.text("#confirm-publish-2")
    assert f"A verify rolled version 2 back (job {verify_job})" in ask and "that verify found worse" in ask, ask
    assert "Changes from version 3, which runs now:" in ask and "policy: batching → chisel" in ask, ask
    p.d.execute_script("document.getElementById('confirm-publish-2').scrollIntoView()")
    p.shot("confirm-publish-rolled-back")
    p.click("#ask-publish-2")  # closed again: no publish
    assert not p.css("#publish-2").is_displayed()
    p.click("#ask-rollback-1")
    ask = p.text("#confirm-rollback-1")
    assert "Adds version 4 with the config of version 1 and publishes it." in ask and "nothing changes" in ask, ask
    p.shot("confirm-rollback")
    publishes = [j for j in _api(live, "GET", f"/jobs?deployment_id={dep['id']}") if j["kind"] == "publish"]
    assert sorted(j["payload"]["version"] for j in publishes) == [1, 2, 3]
    assert not p.console_errors, p.console_errors
