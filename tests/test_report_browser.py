"""The HTML report in a real browser: headless Chromium renders it at two widths, and its
filter, preset through the page address, hides exactly the rows it should. A RAG report
is measured as laid out (a script appended to a copy writes the boxes into the DOM): its
rows show documents and group, status and error fit at 1400 px, each row is a card at
390 px, and the side-by-side view starts with the largest gap. Screenshots are left in
pytest's temporary folder (printed with ``-s``) to be looked at.

Skipped when Chromium is absent (Debian: ``apt-get install chromium``); the structural
tests in test_report_provenance.py always run.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from framekit.analysis import write_html_report
from tests.browser import CHROMIUM, chromium, ink, render
from tests.helpers import RAG_ERROR, STRATEGIES, rag_frame

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)"
)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    n = 60
    frame = pl.DataFrame(
        {
            "id": [f"row{i:03d}" for i in range(n)],
            "strategy": ["bm25", "dense"] * (n // 2),
            "question": [f"question number {i}" for i in range(n)],
            "rr_score": [None if i % 10 == 0 else (i % 7) / 6 for i in range(n)],
            "rr_label": [
                None if i % 10 == 0 else ("relevant" if i % 7 > 3 else "irrelevant")
                for i in range(n)
            ],
            "rr_passed": [None if i % 10 == 0 else i % 7 > 3 for i in range(n)],
            "rr_explanation": ["because"] * n,
            "rr_error": ["judge timed out" if i % 10 == 0 else None for i in range(n)],
        }
    )
    return write_html_report(frame, tmp_path / "report.html", by="strategy")


def shown_rows(dom: str) -> list[str]:
    rows = re.findall(r'<tr data-evaluator="rr"[^>]*>', dom)
    return [r for r in rows if "hidden" not in r]


def test_filter_from_the_address_hides_the_other_rows(report: Path) -> None:
    everything = chromium("--dump-dom", report.as_uri(), cwd=report.parent)
    assert everything.returncode == 0, everything.stderr
    all_rows = shown_rows(everything.stdout)
    assert len(all_rows) == 6 + 20  # 6 failed rows, then the 20 lowest scored
    assert "26 of 26 rows shown" in everything.stdout  # the script ran

    errors = chromium("--dump-dom", report.as_uri() + "#status=error", cwd=report.parent)
    shown = shown_rows(errors.stdout)
    assert len(shown) == 6 and all('data-status="error"' in r for r in shown)
    assert "6 of 26 rows shown" in errors.stdout

    text = chromium("--dump-dom", report.as_uri() + "#q=row020", cwd=report.parent)
    (row,) = re.findall(r'<tr data-evaluator="rr" [^h>]*>(?:(?!</tr>).)*', text.stdout)
    assert "row020" in row and "1 of 26 rows shown" in text.stdout


@pytest.mark.parametrize("width", [1400, 390])
def test_report_renders_at_desktop_and_phone_width(report: Path, width: int) -> None:
    shot = report.parent / f"report-{width}.png"
    laid_out = render(report.as_uri(), width, "document.documentElement.clientWidth", shot)
    assert laid_out == width  # the page laid out at that width, not a crop of a wider one
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == width


def test_a_filter_value_in_the_address_that_matches_no_option_is_shown_not_dropped(
    report: Path,
) -> None:
    # "failed" was the rows table's word for "below threshold": an old link still says it.
    address = report.as_uri() + "#status=failed&evaluator=nope"
    old = chromium("--dump-dom", address, cwd=report.parent)
    assert old.returncode == 0, old.stderr
    (note,) = re.findall(r'<p id="f-note" class="note"( hidden="")?>([^<]*)</p>', old.stdout)
    assert note == (
        "",
        'The address asks for evaluator "nope" and status "failed", which matches no option: '
        "showing all instead.",
    )
    assert "26 of 26 rows shown" in old.stdout and len(shown_rows(old.stdout)) == 26

    below = chromium("--dump-dom", report.as_uri() + "#status=below+threshold", cwd=report.parent)
    shown = shown_rows(below.stdout)
    assert shown and all('data-status="below threshold"' in r for r in shown)
    assert '<p id="f-note" class="note" hidden="">' in below.stdout  # nothing to say


# Run in the page as laid out: the boxes of the cells the tests look at.
MEASURE = """(function () {
  function box(el) {
    if (!el) return null;
    var b = el.getBoundingClientRect();
    return {left: b.left, right: b.right, width: b.width, height: b.height};
  }
  var out = {width: document.documentElement.clientWidth, rows: [], pairs: [], cells: [],
             page: document.documentElement.scrollWidth, layout: window.innerWidth};
  document.querySelectorAll('#rows tbody tr').forEach(function (tr) {
    function at(c) { return tr.querySelector('td[data-col="' + c + '"]'); }
    out.rows.push({status: box(at('status')), error: box(at('error')),
                   errorText: at('error').textContent, documents: box(at('documents')),
                   documentsText: at('documents').textContent, group: box(at('strategy')),
                   groupText: at('strategy').textContent});
  });
  document.querySelectorAll('#rows td, #pairs td').forEach(function (td) {
    var b = box(td); if (b.width > 0) out.cells.push(b.right);
  });
  document.querySelectorAll('#pairs tbody tr').forEach(function (tr) {
    out.pairs.push(tr.dataset.key);
  });
  return out;
})()"""


@pytest.fixture(scope="module")
def rag_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rag-report")
    return write_html_report(rag_frame(), folder / "report.html", by="strategy", on="question_id")


def measure(report: Path, width: int) -> dict:
    shot = report.parent / f"rag-{width}.png"
    page = render(report.as_uri(), width, MEASURE, shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print("screenshot:", shot)  # pytest -s shows where to look
    return page


def test_at_desktop_width_every_row_shows_documents_group_status_and_error(
    rag_report: Path,
) -> None:
    page = measure(rag_report, 1400)
    assert page["width"] == 1400
    rows = page["rows"]
    assert len(rows) == 3 + 20  # the three failed hybrid rows, then the 20 lowest scored
    for row in rows:
        assert row["groupText"] in STRATEGIES and row["group"]["width"] > 0
        assert row["documentsText"].startswith("3 documents: Doc ")
        assert row["documents"]["width"] > 0
        # Status and error fit in the window: nobody has to scroll sideways to see them.
        assert row["status"]["left"] >= 0 and row["status"]["right"] <= page["width"]
        assert row["error"]["right"] <= page["width"]
    assert [r["errorText"] for r in rows[:3]] == [RAG_ERROR] * 3
    # The side-by-side view starts with the one question whose strategies differ by 1.0.
    assert page["pairs"][0] == "7"


def test_under_600_px_each_row_is_a_card_inside_the_screen(rag_report: Path) -> None:
    page = measure(rag_report, 390)
    assert page["width"] == 390
    for row in page["rows"]:
        for part in ("status", "documents", "group"):
            assert row[part]["width"] > 0 and row[part]["right"] <= 390
    # Nothing of either table sticks out to the right: no sideways scrolling on a phone.
    assert page["cells"] and max(page["cells"]) <= 390
    # Nor does anything else (a summary table, a long error in a card): the page is as
    # wide as the phone, not a wider layout the phone shows a part of.
    assert page["page"] <= 390 and page["layout"] == 390
    assert page["pairs"][0] == "7"


# Where the section named by the page address sits once the browser has scrolled to it
# (which it may do after the load event: the script waits until the heading stays put for
# five frames). "text" is the box of the heading's words, not of its full-width block.
ANCHORED = """new Promise(function (done) {
  var heading = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  var words = document.createRange(), last = null, still = 0, start = performance.now();
  words.selectNodeContents(heading);
  function tick() {
    // Against what the window shows (the visual viewport), as the screenshot does.
    var top = heading.getBoundingClientRect().top - window.visualViewport.offsetTop;
    still = last !== null && Math.abs(top - last) < 0.5 ? still + 1 : 0;
    last = top;
    if (still < 5 && performance.now() - start < 5000) return requestAnimationFrame(tick);
    var b = words.getBoundingClientRect();
    var dx = window.visualViewport.offsetLeft, dy = window.visualViewport.offsetTop;
    done({scrolled: window.visualViewport.pageTop, top: top, text: heading.textContent,
          box: [b.left - dx, b.top - dy, b.right - dx, b.bottom - dy]});
  }
  requestAnimationFrame(tick);
})"""


@pytest.mark.parametrize(
    ("anchor", "width"), [("rows-to-look-at", 1400), ("side-by-side", 1400), ("side-by-side", 390)]
)
def test_a_screenshot_at_an_anchor_shows_that_section_at_the_top(
    rag_report: Path, anchor: str, width: int
) -> None:
    pytest.importorskip("matplotlib")
    shot = rag_report.parent / f"rag-{width}-{anchor}.png"
    place = render(f"{rag_report.as_uri()}#{anchor}", width, ANCHORED, shot)
    print("screenshot:", shot)
    assert place["scrolled"] > 500, "the page did not scroll to the section"
    assert abs(place["top"]) <= 2, f"the section's heading is {place['top']} px from the top"
    drawn = ink(shot)
    assert drawn.shape[1] == width
    # Not blank: text and table lines cover a good part of the picture...
    assert drawn.mean() > 0.02, f"only {drawn.mean():.3%} of the screenshot is drawn"
    # ...and the heading's words are drawn where the page says they are, at the top.
    left, top, right, bottom = (round(v) for v in place["box"])
    assert bottom <= 80, f"the heading's words end {bottom} px down"
    words = drawn[max(top, 0) : bottom, left:right]
    assert words.mean() > 0.1, f"nothing drawn where the heading is: {place}"
