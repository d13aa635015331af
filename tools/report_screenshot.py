"""Look at a report.html in headless Chromium: a screenshot, and whether it fits the page.

    .venv/bin/python tools/report_screenshot.py out/sample/report.html --png out/sample/report.png

prints the layout it measured (page and table widths against the window) as JSON and
exits 1 when something sticks out of the page. tests/analyze/test_report_browser.py runs the
same checks on the sample capture's report and on one made of long names.

The browser is Debian's ``chromium-headless-shell`` (scripts/install-browser.sh) or any
Chromium named by ``KPROTO_CHROMIUM``. The report has no script of its own; the
measurement is a copy of it with a small script that writes the layout into the
page, read back with ``--dump-dom``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
TIMEOUT_S = 120
DESKTOP_WIDTH = 1280  # every table fits from here on

# Runs in the page: the widths that decide whether it fits, as JSON in a body attribute.
_MEASURE = """
<script>
(function () {
  var body = document.body.getBoundingClientRect();
  var style = getComputedStyle(document.body);
  var content_right = body.right - parseFloat(style.paddingRight);
  function boxes(selector) {
    return Array.prototype.map.call(document.querySelectorAll(selector), function (e) {
      var r = e.getBoundingClientRect();
      return {left: r.left, right: r.right, width: r.width};
    });
  }
  // Words (runs of letters and digits, up to 24 long: kproto.analyze.spark.report_html.LONG_RUN; a longer
  // run is an id the report lets break) of table cells that the browser split across lines.
  function broken_words() {
    var found = [];
    Array.prototype.forEach.call(document.querySelectorAll("td, th"), function (cell) {
      var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      for (var node = walker.nextNode(); node; node = walker.nextNode()) {
        var word = /[A-Za-z0-9]+/g, m;   // a <wbr> ends a text node: a long run is checked in pieces
        while ((m = word.exec(node.data)) !== null) {
          var range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          var tops = {};
          Array.prototype.forEach.call(range.getClientRects(), function (r) {
            if (r.width > 0) tops[Math.round(r.top)] = true;
          });
          if (m[0].length <= 24 && Object.keys(tops).length > 1 && found.length < 20) found.push(m[0]);
        }
      }
    });
    return found;
  }
  document.body.setAttribute("data-layout", JSON.stringify({
    broken_words: broken_words(),
    window_width: window.innerWidth,
    page_width: document.documentElement.scrollWidth,
    content_right: content_right,
    tables: boxes("table"),
    charts: boxes("svg"),
  }));
})();
</script>
"""


def browser() -> str | None:
    """The Chromium to use, or None when there is none."""
    named = os.environ.get("KPROTO_CHROMIUM")
    if named:
        return named
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def _run(url: str, *args: str, width: int, height: int) -> str:
    exe = browser()
    if exe is None:
        raise FileNotFoundError("no headless Chromium found (scripts/install-browser.sh installs one)")
    # --no-sandbox: CI and containers run as root, where Chromium's sandbox refuses to start.
    command = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        *args,
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{exe} exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def measure(report_html: Path, *, width: int = 1280, height: int = 900) -> dict:
    """The page's layout at a window ``width`` pixels wide (see ``_MEASURE``)."""
    text = report_html.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "report.html"
        probe.write_text(text.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
        dom = _run(probe.as_uri(), "--dump-dom", width=width, height=height)
    found = re.search(r'data-layout="([^"]*)"', dom)
    if found is None:
        raise RuntimeError("the browser gave no layout (did the page load?)")
    return json.loads(html.unescape(found.group(1)))


def problems(layout: dict, *, tables_may_scroll: bool = False) -> list[str]:
    """What sticks out: the page wider than the window, a chart or (unless they may scroll
    in their own box, as in a narrow window) a table past the body's edge; and any word of a
    table cell broken mid-word ("ApiVersio" / "ns"), at every width."""
    out = [f"word {word!r} broken across lines in a table cell" for word in layout["broken_words"]]
    if layout["page_width"] > layout["window_width"]:
        out.append(f"the page is {layout['page_width']} px wide in a {layout['window_width']} px window")
    edge = layout["content_right"] + 0.5
    for kind in ("charts",) if tables_may_scroll else ("tables", "charts"):
        for index, box in enumerate(layout[kind]):
            if box["right"] > edge:
                out.append(
                    f"{kind[:-1]} {index} ends at {box['right']:.0f} px, past the page's "
                    f"{layout['content_right']:.0f} px"
                )
    return out


def screenshot(report_html: Path, png: Path, *, width: int = 1280, height: int = 2400) -> Path:
    """A PNG of the report's first ``height`` pixels at a window ``width`` pixels wide."""
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(report_html.resolve().as_uri(), f"--screenshot={png.resolve()}", width=width, height=height)
    if not png.exists():
        raise RuntimeError(f"the browser wrote no screenshot at {png}")
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a report.html written by kproto analyze")
    parser.add_argument("--png", type=Path, help="also write a screenshot here")
    parser.add_argument(
        "--width",
        type=int,
        action="append",
        help="window widths to check (default 1280 and 900); below DESKTOP_WIDTH a wide "
        "table may scroll in its own box, but the page must not widen",
    )
    args = parser.parse_args(argv)
    found = {}
    for width in args.width or [DESKTOP_WIDTH, 900]:
        layout = measure(args.report, width=width)
        found[str(width)] = {"layout": layout, "problems": problems(layout, tables_may_scroll=width < DESKTOP_WIDTH)}
    if args.png:
        screenshot(args.report, args.png)
    print(json.dumps(found, indent=2))
    return 1 if any(entry["problems"] for entry in found.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
