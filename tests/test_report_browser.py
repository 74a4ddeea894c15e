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


def _starts_in_viewport(locator) -> bool:
    box = locator.bounding_box()
    return box is not None and 0 <= box["y"] < VIEWPORT["height"] and box["x"] + box["width"] <= VIEWPORT["width"]


def _check_answer_first(report, shots, stem: str, headline: list[str]) -> list[str]:
    """The answer sentences at the top (all visible at 1400x900 without scrolling), no sideways scroll
    of the page or of any table (every fold opened), no console error; screenshots saved. Returns the
    sentences."""
    with chromium_page(viewport=VIEWPORT) as b:
        page = b.page
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        top = shots / f"{stem}_top.png"
        page.screenshot(path=str(top))
        assert b.errors == []
        sentences = page.locator("#answer li.answer-sentence")
        texts = sentences.all_inner_texts()
        assert texts and all(_in_viewport(sentences.nth(i)) for i in range(sentences.count())), texts
        assert sorted(t.split(":")[0] for t in texts) == sorted(headline)  # one per headline metric with a value
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no sideways scroll
        assert _starts_in_viewport(page.locator("#headline-table"))
        # each headline metric's meaning, direction and range under its name; notes one click away
        for th in page.locator("#headline-table tr.headline-row th.metric-name").all():
            assert th.locator("small.meaning").inner_text() and "range" in th.locator("small.legend").inner_text()
            for note in th.locator("details.metric-note").all():
                assert not note.evaluate("d => d.open") and not note.locator("small").is_visible()
        assert "no finite value" not in page.locator("#headline").inner_text()  # empty metrics: one line at most
        page.screenshot(path=str(shots / f"{stem}_full.png"), full_page=True)
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        wide = page.evaluate("""[...document.querySelectorAll('table')].filter(t => t.offsetParent
                                && t.scrollWidth > t.clientWidth + 1).map(t => (t.id || t.className) + ' ' + t.scrollWidth)""")
        assert wide == [] and page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        print(f"screenshots: {top} {shots / f'{stem}_full.png'}")
        assert b.errors == []
        return texts


def test_demo_report_leads_with_the_answer(demo_report, shots):
    from convsim.evaluation.reporting.records import load_run, metric_names
    from convsim.graphs import crs_shift
    present = set(metric_names(load_run(demo_report.parent).table))
    texts = _check_answer_first(demo_report, shots, "demo", [m for m in crs_shift.SUMMARY_METRICS if m in present])
    # the paired comparison of the template recommender with the oracle; the gaming reference quoted, not tested
    assert all("oracle" in t and "template" in t for t in texts if "(no test)" not in t)
    assert any("paired" in t for t in texts)
    tas = next(t for t in texts if t.startswith("tas_grounded:"))
    assert "reference echo" in tas and "(not tested)" in tas
    with chromium_page(viewport=VIEWPORT) as b:
        b.page.goto(demo_report.as_uri())
        first = b.page.locator("#headline-table tbody tr.headline-row th").first  # the first headline metric
        assert first.inner_text().startswith(crs_shift.SUMMARY_METRICS[0]) and "higher is better, range [0, 1]" in \
            first.inner_text()
        name = b.page.locator("#headline-table tbody tr.headline-row th", has_text="tas_grounded").first
        assert "higher is better, range [-1, 1]" in name.inner_text()
        name.locator("details.metric-note > summary").click()  # gameable: one click away
        assert name.locator("details.metric-note small").inner_text().startswith("gameable:")
        b.page.locator("#topology > summary").scroll_into_view_if_needed()
        b.page.screenshot(path=str(shots / "demo_topology.png"))


@pytest.fixture(scope="module")
def courses_report(tmp_path_factory):
    from conftest import ROOT
    cfg = load_config(ROOT / "configs" / "courses_reference.yaml").model_copy(
        update={"sessions": 4, "out_dir": str(tmp_path_factory.mktemp("courses")), "run_id": "courses"})
    return run(cfg) / "report.html"


def test_courses_reference_report_leads_with_the_answer(courses_report, shots):
    from convsim.evaluation.reporting.records import load_run, metric_names
    from convsim.graphs import course_retrieval
    present = set(metric_names(load_run(courses_report.parent).table))
    texts = _check_answer_first(courses_report, shots, "courses_reference",
                                [m for m in course_retrieval.SUMMARY_METRICS if m in present])
    # every variant but the baseline is compared with bm25 (the references of the config included)
    compared = len(load_run(courses_report.parent).variants) - 1
    assert all(f"of the {compared} variants against bm25" in t for t in texts if "(no test)" not in t), texts


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
        assert _starts_in_viewport(page.locator("#headline-table"))
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
        assert _starts_in_viewport(b.page.locator("#headline-table"))


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
