"""report.html in headless Chromium at 1400x900: the answer first (headline table and first figure
without scrolling), no console errors, drill-down, escaping; screenshots are written and their
paths printed (pytest -s shows them) so a person can look at what a reader sees."""

import pytest

from analysis_runs import XSS, make_run
from browser import chromium_page, needs_chromium
from convsim import load_config, run
from convsim.evaluation.reporting.analysis import analyze_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

VIEWPORT = {"width": 1400, "height": 900}


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = make_run(tmp_path_factory.mktemp("browser"), variants=("none", "llamacpp:gemma3-270m"), sessions=3)
    analyze_run(run_dir)
    return run_dir / "report.html"


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    from conftest import ROOT
    cfg = load_config(ROOT / "configs" / "crs_shift.yaml").model_copy(
        update={"sessions": 3, "out_dir": str(tmp_path_factory.mktemp("demo")), "run_id": "demo"})
    return run(cfg) / "report.html"


def _in_viewport(locator) -> bool:
    box = locator.bounding_box()
    return (box is not None and box["y"] >= 0 and box["x"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]
            and box["x"] + box["width"] <= VIEWPORT["width"])


def test_demo_report_leads_with_the_answer(demo_report, shots):
    with chromium_page(viewport=VIEWPORT) as b:
        page = b.page
        page.goto(demo_report.as_uri())
        page.wait_for_load_state("load")
        top = shots / "demo_top.png"
        page.screenshot(path=str(top))
        page.screenshot(path=str(shots / "demo_full.png"), full_page=True)
        print(f"screenshots: {top} {shots / 'demo_full.png'}")
        assert b.errors == []
        table = page.locator("#headline-table")
        assert table.is_visible() and _in_viewport(table)
        first = page.locator("figure.headline-figure img").first
        assert first.is_visible() and _in_viewport(first)
        assert first.evaluate("i => i.naturalWidth > 0")
        # the graph's headline metrics are the rows, the one variant the column
        name, note = page.locator("#headline-table tbody tr.headline-row th").first.inner_text().split("\n", 1)
        assert name == "tas_grounded" and note.startswith("gameable:")  # the graph's METRIC_NOTES under the name
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll
        body = page.locator("body").inner_text()
        assert "ANOVA" not in body and "Tukey" not in body  # a single variant: no between-variant statistics
        page.locator("#topology > summary").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "demo_topology.png"))


def test_report_in_headless_chromium(report, shots):
    with chromium_page(viewport=VIEWPORT) as b:
        page, console_errors, dialogs = b.page, b.errors, b.dialogs
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(shots / "two_variants_top.png"))
        print(f"screenshot: {shots / 'two_variants_top.png'}")
        assert console_errors == []
        heads = page.locator("#headline-table thead th").all_inner_texts()
        assert heads[1].startswith("none (baseline)") and any("llamacpp:gemma3-270m − none" in h for h in heads)
        assert _in_viewport(page.locator("#headline-table"))
        # the full dump is folded and transposed: metrics as rows, one column per variant
        dump = page.locator("#summary-table")
        assert not dump.is_visible()
        assert page.locator("#summary-table thead th").all_text_contents() == ["metric", "none", "llamacpp:gemma3-270m"]
        session = page.locator("details.session").first
        assert not session.evaluate("el => el.open")
        transcript = session.locator("table.transcript")
        assert not transcript.is_visible()
        session.locator(":scope > summary").click()
        assert session.evaluate("el => el.open") and transcript.is_visible()
        cell = session.locator("td.text", has_text="<script>")
        assert cell.count() == 1 and XSS in cell.inner_text()
        assert "shift" in session.locator("tr.shift").first.inner_text()
        assert dialogs == []  # the script never ran
        assert page.locator("figure img").count() >= 5
        assert all(page.evaluate("[...document.images].map(i => i.naturalWidth > 0)"))


def test_many_variants_do_not_scroll_sideways(tmp_path, shots):
    from convsim.evaluation.reporting.report import build_report
    run_dir = make_run(tmp_path, variants=("v1", "v2", "v3", "v4", "v5"), sessions=3)
    report = build_report(run_dir)
    with chromium_page(viewport=VIEWPORT) as b:
        b.page.goto(report.as_uri())
        b.page.wait_for_load_state("load")
        b.page.screenshot(path=str(shots / "five_variants_top.png"))
        print(f"screenshot: {shots / 'five_variants_top.png'}")
        assert b.errors == []
        assert b.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # more than four variants: the differences get a table of their own under the means
        assert b.page.locator("#headline-diffs thead th").count() == 5
        assert _in_viewport(b.page.locator("#headline-table"))


def test_eight_long_named_variants_fit_the_page(tmp_path, shots):
    """An 8-variant run with a long variant name was 3187 px wide in a 1400 px viewport (the
    difference table's headers and cells did not wrap), and its headline figures squeezed eight
    labels into 250 px."""
    from convsim.evaluation.reporting.report import build_report
    names = ("variant_alpha_with_a_rather_long_descriptive_name", "b2", "c3", "d4", "e5", "f6", "g7",
             "h8_another_variant_with_a_long_name")
    run_dir = make_run(tmp_path, variants=names, sessions=3)
    report = build_report(run_dir)
    with chromium_page(viewport=VIEWPORT) as b:
        page = b.page
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(shots / "eight_long_top.png"))
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.screenshot(path=str(shots / "eight_long_open.png"), full_page=True)
        print(f"screenshots: {shots / 'eight_long_top.png'} {shots / 'eight_long_open.png'}")
        assert b.errors == []
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
        widths = page.eval_on_selector_all("figure.headline-figure img", "els => els.map(e => e.clientWidth)")
        assert widths and all(w > 400 for w in widths)  # drawn wider for eight variants, shown wider
        assert page.locator("#headline-diffs thead th").count() == 8
