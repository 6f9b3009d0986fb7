"""`neurotui compare --format html --out F`: one page to share, opened in headless Chromium.

The page must open offline (no src or href leaves the file), name both runs, hold its charts
as inline SVG that the browser draws, and say the figures the JSON says.
"""

from __future__ import annotations

import asyncio
import json
import math
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.e2e.browser import CHROMIUM, Chromium
from tests.e2e.conftest import REPO, run_cli

SAMPLES = REPO / "sessions"
PRICES = ("--price", "sample-cpu=1.34375", "--price", "sample-xla=0.7582")


class _Links(HTMLParser):
    """Every src and href of the page, and its tags."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href")]


_FIGURES = """(() => [...document.querySelectorAll('#figures tbody tr')].map(tr => ({
  session: tr.dataset.session,
  figures: Object.fromEntries([...tr.querySelectorAll('td')].map(td => [td.dataset.key,
                                                                        td.dataset.value])),
})))()"""
_CHARTS = """(() => [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  return {chart: svg.dataset.chart, width: box.width, height: box.height,
          bars: [...svg.querySelectorAll('rect[data-value]')].map(r => r.getBBox().width),
          lines: [...svg.querySelectorAll('polyline')].map(p => p.getTotalLength())};
}))()"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium")
async def test_the_page_opens_offline_and_says_what_the_json_says(tmp_path: Path) -> None:
    page_file = tmp_path / "compare.html"
    done = run_cli(SAMPLES, "compare", "sample-cpu", "sample-xla", *PRICES,
                   "--format", "html", "--out", str(page_file))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    html = page_file.read_text("utf-8")
    parsed = _Links()
    parsed.feed(html)
    assert parsed.links == []  # nothing to fetch: no script, font, style sheet or image
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert parsed.tags.count("svg") == 3
    assert "sample-cpu-gloo" in html and "sample-xla-cpu" in html

    as_json = run_cli(SAMPLES, "compare", "sample-cpu", "sample-xla", *PRICES,
                      "--format", "json")
    rows = json.loads(as_json.stdout)

    async with Chromium(tmp_path / "profile") as browser:
        page = await browser.page()
        await page.open(page_file.as_uri(), 1200, 1800)
        for _ in range(100):
            if await page.evaluate("document.readyState") == "complete":
                break
            await asyncio.sleep(0.1)
        shown = await page.evaluate(_FIGURES)
        charts = await page.evaluate(_CHARTS)
        decision = await page.evaluate("document.getElementById('decision').textContent")
        shot = await page.screenshot(tmp_path / "compare.png")

    assert [r["session"] for r in shown] == ["sample-cpu-gloo", "sample-xla-cpu"]
    for row, on_page in zip(rows, shown, strict=True):
        for key, raw in on_page["figures"].items():
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            assert raw != "", (row["session"], key)
            assert math.isclose(float(raw), value, rel_tol=1e-12), (row["session"], key)
        for key in ("samples_per_s", "samples_per_dollar_steady", "usd_per_hour",
                    "relative_price_performance"):
            assert key in on_page["figures"]
    assert decision.startswith("Better deal: sample-cpu-gloo, 1.47x (+47%)")

    by_chart = {c["chart"]: c for c in charts}
    assert set(by_chart) == {"samples_per_dollar_steady", "samples_per_s", "throughput"}
    for chart in charts:
        assert chart["width"] > 300 and chart["height"] > 50, chart
    # Bars in proportion to the figures: samples/$ 6,893,902 against 4,704,010.
    wide, narrow = by_chart["samples_per_dollar_steady"]["bars"]
    assert narrow / wide == pytest.approx(rows[1]["samples_per_dollar_steady"]
                                          / rows[0]["samples_per_dollar_steady"], rel=1e-3)
    assert len(by_chart["throughput"]["lines"]) == 2
    assert all(length > 100 for length in by_chart["throughput"]["lines"])
    assert shot.stat().st_size > 10_000


def test_svg_alone_is_one_standalone_document(tmp_path: Path) -> None:
    out = tmp_path / "charts.svg"
    done = run_cli(SAMPLES, "compare", "sample-cpu", "sample-xla", *PRICES,
                   "--format", "svg", "--out", str(out))
    assert done.returncode == 0, done.stderr
    svg = out.read_text("utf-8")
    tree = ET.fromstring(svg)
    assert tree.tag == "{http://www.w3.org/2000/svg}svg"
    texts = "".join(tree.itertext())
    assert "sample-cpu-gloo" in texts and "sample-xla-cpu" in texts
    assert len(tree.findall(".//{http://www.w3.org/2000/svg}polyline")) == 2



def test_names_and_notes_are_text_never_markup() -> None:
    import pandas as pd

    from neurotui.compare.page import render_page

    hostile = '<script>alert(1)</script><img src="http://x/y.png">'
    rows = [{"session": hostile, "phases_s": {}, "samples_per_s": 10.0,
             "price_note": '"><a href="http://evil">x</a>', "step_source": "<b>log</b>"}]
    overlay = pd.DataFrame({"session": [hostile, hostile], "t_s": [0.0, 10.0],
                            "samples_per_s": [0.0, 10.0]})
    page = render_page(rows, overlay, notes=[f"{hostile}: a note"])
    parsed = _Links()
    parsed.feed(page)
    assert parsed.links == [] and "script" not in parsed.tags and "img" not in parsed.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Better deal: unknown, no run has a price" in page
