"""The site's pages as HTML strings (plain templates; every value through html.escape; no
JavaScript, no external resource): the overview, a page per paper, a page per strategy. The
content comes assembled (harness/report/site/data.py); file names are the site's (site.py)."""

from __future__ import annotations

import re
from html import escape

import pandas as pd

from harness.report import metrics
from harness.report.claims import report as claims_report
from harness.report.claims import BASES, CELL, VERDICTS, ClaimResult, counted, derived_bases
from harness.report.site import claim_pages
from harness.report.site.data import (BASIS_COLUMN, Figure, PaperPage, Site, StrategyPage, built_text,
                                      paper_claims, provenance, tally_groups)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1c1c1c;line-height:1.4}
header{background:#24364b;color:#fff;padding:.6em 1.2em}header a{color:#fff;margin-right:1em}
main{padding:0 1.2em 2em;max-width:1400px}h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}th,td{border:1px solid #ccc;padding:.2em .45em;
vertical-align:top}th{background:#eef1f5;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.v-holds{background:#d6f0d6}.v-partly{background:#fcefc7}.v-does-not-hold{background:#f6d0d0}
.v-inconclusive{background:#e4e4e4}.v-not-exercised{background:#e6eef8;color:#345}
.v-not-measured{background:#fff;color:#777}.flip{font-weight:bold;color:#a05a00}
.figure{display:flex;flex-wrap:wrap;gap:1.2em;align-items:flex-start}.figure img{max-width:900px;width:100%;
height:auto;border:1px solid #ddd}.figure aside{flex:1;min-width:280px;font-size:.9em}
.claim{border-left:4px solid #9ab;padding:.2em .8em;margin:1em 0}.prov{font-size:.8em;color:#555}
ul.cells{font-size:.85em}code{background:#f3f3f3;padding:0 .2em}.diag{white-space:pre-wrap;background:#f8f8f0;
padding:.4em;border:1px solid #e0e0c8}.stale{background:#fde3c4;border:1px solid #d9a05b;padding:.2em .4em}
"""


def paper_file(paper: str) -> str:
    return f"paper-{paper}.html"


def strategy_file(page_slug: str) -> str:
    return f"strategy-{page_slug}.html"


def figure_file(key: str, ext: str) -> str:
    return f"figures/{key}.{ext}"


def _inline_md(text: str) -> str:
    """**bold** and `code` of a Markdown sentence, escaped."""
    out = escape(str(text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"(?<![*\w])\*(\w[^*]*?)\*(?![*\w])", r"<em>\1</em>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def _vclass(verdict: str) -> str:
    return "v-" + verdict.split(" (")[0].replace(" ", "-")


def table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape on the way in)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def page(title: str, body: str, site: Site) -> str:
    nav = [f'<a href="index.html">Overview</a>'] + [f'<a href="{paper_file(p.paper)}">{escape(p.title)}</a>'
                                                     for p in site.papers]
    nav.append('<a href="index.html#strategies">Strategies</a>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{escape(title)}</title><style>{CSS}</style></head>"
            f"<body><header><nav>{''.join(nav)}</nav></header><main><h1>{escape(title)}</h1>{body}"
            f"{_built(site)}</main></body></html>\n")


def _built(site: Site) -> str:
    return f'<p class="prov">Built by <code>python -m harness.report.site</code> {escape(built_text(site.built))}.</p>'


def provenance_html(rows: pd.DataFrame, heading: str = "Provenance") -> str:
    p = provenance(rows)
    keys = p["config_keys"]
    reps = p["repetitions"]
    items = [f"runs: {p['runs']}",
             f"code version: {escape(', '.join(p['code_version']) or 'not recorded')}",
             f"config keys: {len(keys)}" + (f" ({escape(', '.join(keys[:4]))}{', ...' if len(keys) > 4 else ''})"
                                            if keys else ""),
             f"machine (cluster): {escape(', '.join(p['cluster']) or 'not recorded')}",
             f"date: {escape(str(p['first']))} to {escape(str(p['last']))}" if p["first"] else "date: not recorded",
             f"repetitions: {reps[0]}-{reps[1]}" if reps else "repetitions: not recorded"]
    return (f'<section class="prov"><h3>{escape(heading)}</h3><ul>' + "".join(f"<li>{i}</li>" for i in items)
            + "</ul></section>")


def verdict_cell(r: ClaimResult, basis: str) -> str:
    v = r.on(basis)
    text = escape(v.verdict) + (" (no basis)" if "any" in r.verdicts else "")
    if basis == "network" and r.flips:
        text += ' <span class="flip" title="the verdict differs between the bases">flips</span>'
    if basis in r.findings:
        text += ' <span class="flip" title="holds on this basis, not on compute">finding</span>'
    return f'<td class="{_vclass(v.verdict)}" data-basis="{basis}">{text}</td>'


# ------------------------------------------------------------------------------------------ overview


def overview(site: Site) -> str:
    rows = []
    for key, title, group in tally_groups(site.claims):
        for basis in (*BASES, *derived_bases(group)):  # a derived basis: the claims judged on it
            judged = [r for r in group if basis in BASES or basis in r.verdicts]
            counts = {k: 0 for k in VERDICTS}
            for r in judged:
                counts[r.on(basis).kind] += 1
            rows.append([escape(title), basis] + [
                f'<td class="num {_vclass(k)}" data-group="{escape(key)}" data-basis="{basis}" '
                f'data-verdict="{escape(k)}">{counts[k]}</td>' for k in VERDICTS] + [f'<td class="num">{len(judged)}</td>'])
    tally = table(["paper", "basis", *VERDICTS, "claims"], rows, "tally")
    claim_rows = []
    derived = derived_bases(site.claims)
    for r in site.claims:
        c = r.claim
        link = f'<a href="{paper_file(c["paper"])}#{escape(c["id"])}">{escape(c["id"])}</a>'
        ext = " <em>(harness extension)</em>" if c.get("scope") == "extension" else ""
        claim_rows.append([link + ext, escape(c.get("paper", "")), escape(c.get("claim", "")),
                           verdict_cell(r, "compute"), verdict_cell(r, "network"),
                           *(verdict_cell(r, b) if b in r.verdicts else '<td>-</td>' for b in derived)])
    flips = [r for r in site.claims if r.flips]
    strategies = "".join(f'<li><a href="{strategy_file(s.slug)}">{escape(s.name)}</a> ({len(s.runs)} runs, first '
                         f'{len(s.first)}, last {len(s.last)})</li>' for s in site.strategies)
    body = (f"<p>{_inline_md(claims_report.BASIS_NOTE)}</p><h2 id=\"tally\">Verdicts per paper</h2>{tally}"
            f"<p>{len(flips)} claims change verdict between the bases.</p>"
            f"<h2 id=\"claims\">Every claim</h2>"
            + claims_report_html(site.claims)
            + table(["claim", "paper", "what the paper says", "compute", "network", *derived], claim_rows, "claims")
            + f"<h2 id=\"strategies\">Strategies</h2><ul>{strategies or '<li>no runs</li>'}</ul>"
            + "<h2 id=\"downloads\">Downloads</h2><ul><li><a href=\"downloads/runs.csv\">runs table (CSV)</a></li>"
              "<li><a href=\"downloads/runs.parquet\">runs table (Parquet)</a></li></ul>"
            + provenance_html(site.table, "Provenance of the runs table"))
    return page("Published claims against this harness", body, site)


# ------------------------------------------------------------------------------------------- papers


def _list(items: list[str], cls: str = "cells") -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>" if items else ""


def claim_block(r: ClaimResult, diagnosis: claim_pages.Note | str | None) -> str:
    c = r.claim
    chk = c["check"]
    head = (f'<div class="claim" id="{escape(c["id"])}"><h3>{escape(c["id"])}'
            + (" <em>(harness extension)</em>" if c.get("scope") == "extension" else "") + "</h3>"
            f"<p>{escape(c.get('claim', ''))} ({escape(c.get('source', ''))}; metric <code>{escape(chk['metric'])}"
            f"</code>, kind <code>{escape(chk['kind'])}</code>)</p>")
    parts = [head, "<p>published: " + escape(c.get("published") or "no figure quoted")
             + (f" (setting: {escape(c['setting'])})" if c.get("setting") else "") + "</p>",
             table(["basis", "verdict"], [[escape(b), verdict_cell(r, b)] for b in
                                          (("any",) if "any" in r.verdicts else (*BASES, *r.derived))])]
    for basis, v in r.verdicts.items():
        parts.append(f"<p>{escape(basis)}: cells compared</p>" + (_list(v.comparisons) or "<p><em>none</em></p>"))
        if v.missing:
            parts.append(f"<p>{escape(basis)}: missing cells</p>" + _list(v.missing))
    excluded = next(iter(r.verdicts.values())).excluded
    parts.append("<p>runs left out</p>" + (_list(excluded) or "<p><em>none</em></p>"))
    parts.append('<h4>diagnosis</h4>' + claim_pages.note_html(diagnosis))
    return "".join(parts) + "</div>"


def figure_section(f: Figure, diagnoses: dict) -> str:
    published = "".join(f"<li><strong>{escape(r.claim['id'])}</strong>: {escape(r.claim.get('published') or 'no figure quoted')}"
                        + (f"<br><em>setting:</em> {escape(r.claim['setting'])}" if r.claim.get("setting") else "")
                        + (f"<br><em>source:</em> {escape(r.claim['source'])}" if r.claim.get("source") else "")
                        + "</li>" for r in f.claims)
    plot = "line plot over " + f.xaxis if f.xaxis else "one point per strategy and cell"
    return (f'<section id="fig-{escape(f.key)}"><h2>{escape(f.title)}</h2><div class="figure">'
            f'<img src="{figure_file(f.key, "svg")}" alt="{escape(f.title)}">'
            f"<aside><h3>Published (the paper's figure)</h3><ul>{published}</ul>"
            f"<p>Ours: {escape(plot)}; {len(f.data)} runs read at code version {escape(str(f.version))}. "
            + ("Throughput: compute-only filled with its interval, network model hollow. " if len(f.columns) > 1 else "")
            + f'<a href="{figure_file(f.key, "csv")}">numbers of this figure (CSV)</a></p></aside></div>'
            + "".join(claim_block(r, diagnoses.get(r.claim["id"])) for r in f.claims)
            + provenance_html(f.data, f"Provenance of {f.title}") + "</section>")


def paper_html(p: PaperPage, site: Site, diagnoses: dict) -> str:
    own = paper_claims(p.claims, p.paper)
    counts = "; ".join(f"{b}: " + ", ".join(f"{n} {k}" for k, n in _tally(own, b).items() if n) for b in BASES)
    toc = "".join(f'<li><a href="#fig-{escape(f.key)}">{escape(f.title)}</a> ('
                  + ", ".join(f'<a href="#{escape(r.claim["id"])}">{escape(r.claim["id"])}</a>' for r in f.claims)
                  + ")</li>" for f in p.figures)
    body = (f"<p>{len(p.claims)} claims ({escape(counts)}).</p><ul>{toc}</ul>"
            + "".join(figure_section(f, diagnoses) for f in p.figures))
    return page(p.title, body, site)


def _tally(group: list[ClaimResult], basis: str) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for r in counted(group):  # a retired claim is shown with its reason, never counted
        counts[r.on(basis).kind] += 1
    return counts


# --------------------------------------------------------------------------------------- strategies


def _fmt(col: str, v) -> str:
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return "-"
    if isinstance(v, str) or not metrics.known(col):
        return escape(str(v))
    return escape(metrics.show(col, v))


def _cell_text(r: pd.Series) -> str:
    parts = [str(r["workload"]), str(r["dataset"]), f"{r['workers']}w"]
    for k in ("x", "facet"):
        if r.get(k) is not None and not (isinstance(r.get(k), float) and pd.isna(r.get(k))):
            parts.append(f"{k}={r[k]}")
    return escape(" / ".join(parts))


def _rank(r: pd.Series, basis: str) -> str:
    n, rank = r[f"n_{basis}"], r[f"rank_{basis}"]
    return "-" if pd.isna(rank) else f"{int(rank)}/{int(n)}"


def _runs_rows(runs: pd.DataFrame) -> list[list[str]]:
    out = []
    for _, r in runs.iterrows():  # a page's table: pandas rows of one strategy, never Spark data
        out.append([escape(str(r["preset"])), _cell_text(r)]
                   + [f'<td class="num">{_fmt(c, r[c])}</td>' for c in BASIS_COLUMN.values()]
                   + [f'<td class="num">{_rank(r, b)}</td>' for b in BASES]
                   + [_fmt("bottleneck_resource", r["bottleneck_resource"])]
                   + [f'<td class="num">{_fmt(c, r[c])} (cell {_fmt(c, r["cell_median_" + c])})</td>'
                      for c in ("obj_replication", "busy_max_min")]
                   + [f"<code>{escape(str(r['run_id']))}</code>"])
    return out


RUN_HEADERS = ["preset", "cell", "compute-only (events/s)", "network (events/s)", "rank compute", "rank network",
               "bottleneck", "object replication (cell median)", "busy max/min (cell median)", "run"]


def strategy_html(s: StrategyPage, site: Site) -> str:
    body = (f"<p>{len(s.runs)} runs read by the presets' claims; first among the strategies of its preset and cell "
            f"in {len(s.first)}, last in {len(s.last)} (on either basis, cells with two strategies or more). "
            "Why: the bottleneck resource, the object replication and the busy max/min, each beside the "
            f"cell's median. {s.unread} other rows of the runs table name it (failed, superseded by a newer run "
            "of the same cell, older code versions, or outside any preset): "
            '<a href="downloads/runs.csv">runs table (CSV)</a>.</p>'
            f'<h2 id="first">Where it ranks first</h2>' + (table(RUN_HEADERS, _runs_rows(s.first)) if len(s.first)
                                                            else "<p><em>nowhere</em></p>")
            + f'<h2 id="last">Where it ranks last</h2>' + (table(RUN_HEADERS, _runs_rows(s.last)) if len(s.last)
                                                            else "<p><em>nowhere</em></p>")
            + '<h2 id="runs">Every run</h2>' + table(RUN_HEADERS, _runs_rows(s.runs))
            + provenance_html(s.runs))
    return page(f"Strategy {s.name}", body, site)


def claims_report_html(claim_results: list[ClaimResult]) -> str:
    """The derived bases' note (claims_report.derived_note) as paragraphs; empty without one."""
    return "".join(f"<p>{_inline_md(line)}</p>" for line in claims_report.derived_note(claim_results) if line)


__all__ = ["overview", "paper_html", "strategy_html", "paper_file", "strategy_file", "figure_file", "CELL"]
