"""report.html in headless Chromium: no console errors, one summary row per variant, drill-down, escaping."""

import pytest

from analysis_runs import XSS, make_run
from browser import chromium_page, needs_chromium
from evaluation.analysis import analyze_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = make_run(tmp_path_factory.mktemp("browser"), variants=("none", "llamacpp:gemma3-270m"), sessions=3)
    analyze_run(run_dir)
    return run_dir / "report.html"


def test_report_in_headless_chromium(report):
    with chromium_page() as b:
        page, console_errors, dialogs = b.page, b.errors, b.dialogs
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        assert console_errors == []
        assert page.locator("#summary-table tbody tr").count() == 2
        assert page.locator("#summary-table tbody tr td:first-child").all_inner_texts() == ["none", "llamacpp:gemma3-270m"]
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
