"""The dated record of a reproduction (`python -m harness.report.site --record docs/reproduction`,
`make record`): from a built site, into DIR

    DIR/report.md        the overview as Markdown: the commit, the machine and the date, the verdict
                         counts per paper on both bases, every claim with its verdicts, and each
                         paper's figures
    DIR/figures/         every figure of the paper pages (SVG) with its numbers (CSV)
    DIR/overview.png     a screenshot of the overview by headless Chromium, when it is installed

DIR's other files (README.md, written by hand) are left alone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.report.claims import report as claims_report
from harness.report.results import PROJECT_ROOT
from harness.report.site.data import Site, built_text

CHROMIUM = ("chromium", "/usr/bin/chromium", "chromium-browser")
# a browser that asks nothing of the network and keeps no profile
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def chromium() -> str | None:
    return next((shutil.which(c) for c in CHROMIUM if shutil.which(c)), None)


def screenshot(page: Path, png: Path, size: str = "1280,1600") -> str | None:
    """A screenshot of a local page by headless Chromium; why not, when it cannot."""
    exe = chromium()
    if exe is None:
        return "no chromium (apt-get install chromium chromium-driver)"
    profile = png.parent / ".chromium-profile"
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}", f"--screenshot={png}",
           page.resolve().as_uri()]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return "chromium timed out"
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return None if done.returncode == 0 and png.exists() else f"chromium failed: {done.stderr.strip()[-300:]}"


def shown_path(dest: Path) -> str:
    """DEST as a reader types it: relative to the repository when inside it (no machine path)."""
    try:
        return str(dest.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return dest.name


def markdown(site: Site, dest: Path = Path("docs/reproduction"), flags: str = "") -> list[str]:
    lines = ["# Reproduction record", "",
             f"Built by `python -m harness.report.site {flags}--record {shown_path(dest)}` (`make record`) "
             f"{built_text(site.built)}. Nothing here depends on when, where or at which commit it was built: "
             f"`make record` with the same tables and claims rebuilds it byte for byte. The site itself: "
             f"`make site`, then results/site/index.html.", "",
             claims_report.BASIS_NOTE, "", "## Verdicts per paper", ""] + claims_report.tally_table(site.claims)
    flips = [r for r in site.claims if r.flips]
    lines += ["", f"{len(flips)} claims change verdict between the bases: "
              + (", ".join(f"`{r.claim['id']}`" for r in flips) or "none") + ".", ""]
    lines += claims_report.derived_note(site.claims)
    for paper in site.papers:
        lines += [f"## {paper.title}", ""] + claims_report.claims_table(paper.claims) + [""]
        for fig in paper.figures:
            claims = ", ".join(f"`{r.claim['id']}`" for r in fig.claims)
            lines += [f"### {fig.title}", "", f"Claims: {claims}. Numbers: [figures/{fig.key}.csv](figures/{fig.key}.csv).",
                      "", f"![{fig.title}](figures/{fig.key}.svg)", ""]
    return lines


def record(site: Site, site_dir: Path, dest: Path, flags: str = "") -> list[Path]:
    """report.md, figures/ and overview.png of the built site under `site_dir` into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    figures = dest / "figures"
    if figures.exists():
        shutil.rmtree(figures)
    shutil.copytree(site_dir / "figures", figures) if (site_dir / "figures").exists() else figures.mkdir()
    report = dest / "report.md"
    report.write_text("\n".join(markdown(site, dest, flags)) + "\n")
    out = [report, figures]
    why = screenshot(site_dir / "index.html", dest / "overview.png")
    if why is None:
        out.append(dest / "overview.png")
    else:
        print(f"no overview.png: {why}")
    return out
