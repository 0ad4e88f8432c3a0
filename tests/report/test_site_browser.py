"""The results site in a real browser: headless Chromium from the system's packages (Debian's
`chromium` and `chromium-driver`), driven by selenium, over a site built from a tiny runs table
and served on 127.0.0.1. Every page loads without a console error, every internal link, anchor and
download resolves, every figure renders with a non-zero size, the overview's counts are the claims
engine's, and a screenshot of the overview is kept (tmp_path, and results/site-test/overview.png).

No browser is downloaded at run time: without the system's Chromium the test fails and says how to
install it (.ci/run installs it before make test)."""

from __future__ import annotations

import functools
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

from harness.report import claims, site
from harness.report.results import PROJECT_ROOT
from harness.report.site.data import tally_groups
from harness.report.site.record import CHROMIUM_FLAGS
from tests.report import site_tiny

INSTALL = "make browser (apt-get update && apt-get install -y chromium chromium-driver)"


def _browser_paths() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium") or "/usr/bin/chromium", shutil.which("chromedriver")
    if not Path(chromium).exists() or driver is None:
        pytest.fail(f"the results site's browser test needs the system's headless Chromium and its driver, and "
                    f"{'chromium' if not Path(chromium).exists() else 'chromedriver'} is missing: install them "
                    f"with `{INSTALL}` (as root; `make test` does it when they are missing). No browser is downloaded at run time.",
                    pytrace=False)
    return chromium, driver


def _driver(tmp_path: Path):
    chromium, driver_path = _browser_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing from the environment: `make venv` (requirements.txt) installs it",
                    pytrace=False)
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium's driver manager asks no server for anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=options)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """The site of the tiny table, built once for the module (each test serves its own copy)."""
    out = tmp_path_factory.mktemp("built") / "site"
    return site.build(site_tiny.table(), out, site_tiny.claim_list()), out


@pytest.fixture()
def served(built_site, tmp_path):
    built, original = built_site
    out = tmp_path / "site"
    shutil.copytree(original, out)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield built, out, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


LINKS = """return [...document.querySelectorAll('a[href]')].map(a => a.href)
  .concat([...document.querySelectorAll('img')].map(i => i.src));"""
IMAGES = """return [...document.images].map(i => [i.src, i.complete, i.naturalWidth, i.naturalHeight,
  i.getBoundingClientRect().width, i.getBoundingClientRect().height]);"""
COUNTS = """return [...document.querySelectorAll('td[data-verdict]')].map(td =>
  [td.dataset.group, td.dataset.basis, td.dataset.verdict, td.textContent.trim()]);"""


def crawl(driver, base: str) -> tuple[list[str], set[str], dict]:
    """Follow every link from the overview: (problems, pages seen, files fetched with (status, bytes))."""
    problems, pages, seen, anchors, fetched = [], deque([base + "index.html"]), set(), {}, {}
    while pages:
        url = pages.popleft()
        if url in seen:
            continue
        seen.add(url)
        driver.get(url)
        problems += [f"{url}: console error {e['message']}" for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        if not driver.title:
            problems.append(f"{url}: no title (did it load?)")
        for src, complete, nw, nh, w, h in driver.execute_script(IMAGES):
            if not (complete and nw > 0 and nh > 0 and w > 0 and h > 0):
                problems.append(f"{url}: figure {src} did not render ({nw}x{nh}, shown {w}x{h})")
        for link in driver.execute_script(LINKS):
            if urlparse(link).netloc != urlparse(base).netloc:
                if urlparse(link).scheme != "data":
                    problems.append(f"{url} links outside the site: {link}")
                continue
            target, fragment = urldefrag(link)
            if fragment:
                anchors.setdefault(target, set()).add(fragment)
            if target.endswith(".html"):
                pages.append(target)
            elif target not in fetched:
                try:
                    with urllib.request.urlopen(target, timeout=10) as resp:
                        fetched[target] = (resp.status, len(resp.read()))
                except urllib.error.HTTPError as exc:
                    fetched[target] = (exc.code, 0)
    problems += [f"{t}: HTTP {s}, {n} bytes" for t, (s, n) in fetched.items() if s != 200 or n == 0]
    for page, fragments in anchors.items():  # every #anchor a link names exists on its page
        if page not in seen:
            continue
        driver.get(page)
        problems += [f"{page} lacks the anchor #{f}" for f in sorted(fragments)
                     if not driver.execute_script("return !!document.getElementById(arguments[0])", f)]
    return problems, seen, fetched


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = _driver(tmp_path_factory.mktemp("chromium"))
    yield d
    d.quit()


def test_every_page_link_and_figure_works_in_a_real_browser(served, driver, tmp_path):
    t0 = time.perf_counter()
    built, out, base = served
    problems, seen, fetched = crawl(driver, base)
    assert problems == []
    # every page of the site was reached by following links from the overview
    assert {Path(urlparse(u).path).name for u in seen} == {p.name for p in out.glob("*.html")}
    assert any(u.endswith("runs.parquet") for u in fetched) and any(u.endswith(".csv") for u in fetched)
    assert sum(u.endswith(".svg") for u in fetched) == len(list((out / "figures").glob("*.svg"))) == 5

    driver.get(base + "index.html")
    shown = {(g, b, v): int(n) for g, b, v, n in driver.execute_script(COUNTS)}
    expected = {(key, basis, verdict): n for key, _, group in
                tally_groups(claims.evaluate_all(site_tiny.table(), claims=site_tiny.claim_list()))
                for basis in claims.BASES for verdict, n in claims.tally(group, basis).items()}
    assert shown == expected and sum(shown.values()) == 2 * len(site_tiny.claim_list())
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(4000, height + 100))
    shot = tmp_path / "overview.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    try:  # the artifact where a reader of the test run finds it
        keep = PROJECT_ROOT / "results" / "site-test"
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, keep / "overview.png")
    except OSError:
        pass
    assert time.perf_counter() - t0 < 30, "the browser check should stay fast"


def test_the_browser_check_sees_a_missing_figure_a_broken_link_and_a_script_error(served, driver):
    built, out, base = served
    (out / "figures" / "sweep-throughput_eps.svg").unlink()
    index = out / "index.html"
    index.write_text(index.read_text().replace("</main>", '<a href="nowhere.csv">x</a><a href="paper-sstd.html#no">y'
                                               '</a><script>console.error("boom")</script></main>'))
    problems, _, _ = crawl(driver, base)
    text = "\n".join(problems)
    assert "figure " + base + "figures/sweep-throughput_eps.svg did not render" in text
    assert "console error" in text and "boom" in text and "sweep-throughput_eps.svg" in text
    assert base + "nowhere.csv: HTTP 404" in text and "paper-sstd.html lacks the anchor #no" in text
