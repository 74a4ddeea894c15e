"""A run's records read through an index (convsim.results.recordset): the same records, order and
one-per-session rule as reading the whole file, without holding the records."""
import json

import pytest

from convsim import ConvsimError
from convsim.results.recordset import RecordSet, statuses_of
from convsim.running.store import RunStore
from convsim.results.summary import status_counts, summarise_run
from convsim.evaluation.reporting.records import load_run, metric_table
from convsim.evaluation.reporting.report import shown_sessions


def _rec(variant, sid, trial=0, status="ok", **metrics):
    return {"variant": variant, "session_id": sid, "trial": trial, "status": status, "seed": hash(sid) % 97,
            "dialogue_metrics": metrics, "transcript": [{"speaker": "user", "text": "x" * 50}]}


def _write(path, records, *, bom=False):
    text = "".join(json.dumps(r) + "\n" for r in records)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def test_one_record_per_session_the_last_written_in_key_order(tmp_path):
    recs = [_rec("b", "s2", m=1.0), _rec("a", "s9", status="infra_error"), _rec("a", "s1", m=2.0),
            _rec("a", "s9", m=3.0), _rec("a", "s1", trial=1, m=4.0)]
    rs = RecordSet.scan(_write(tmp_path / "results.jsonl", recs))
    assert rs.keys == [("a", "s1", 0), ("a", "s1", 1), ("a", "s9", 0), ("b", "s2", 0)]
    assert [r["dialogue_metrics"]["m"] for r in rs] == [2.0, 4.0, 3.0, 1.0]  # s9: the re-run replaced the error
    assert len(rs) == 4 and rs[2]["status"] == "ok" and rs[-1]["variant"] == "b"
    # the same records as the store's own reader (which holds them all)
    by_key = {(r["variant"], r["session_id"], r["trial"]): r for r in RunStore(tmp_path).records()}
    assert list(rs) == [by_key[k] for k in rs.keys]
    assert isinstance(rs[1:3], RecordSet) and rs[1:3].keys == rs.keys[1:3]
    assert rs.variants == ["a", "b"] and statuses_of(rs) == ["ok"] * 4
    assert rs.where(variant="a").keys == rs.keys[:3]
    assert rs.take([3, 0]).keys == [("b", "s2", 0), ("a", "s1", 0)]


def test_records_are_parsed_afresh_so_a_consumer_cannot_change_them(tmp_path):
    rs = RecordSet.scan(_write(tmp_path / "r.jsonl", [_rec("a", "s1", m=1.0)]))
    first = rs[0]
    first["dialogue_metrics"]["m"] = 99
    assert rs[0]["dialogue_metrics"]["m"] == 1.0


def test_status_filters_read_the_index_not_the_file(tmp_path):
    path = _write(tmp_path / "r.jsonl", [_rec("a", "s1"), _rec("a", "s2", status="code_error"),
                                          _rec("a", "s3", status="simulator_failure")])
    rs = RecordSet.scan(path)
    path.write_text("")  # the file is gone: only the index can answer now
    assert status_counts(rs)["code_error"] == 1 and status_counts(rs)["sessions"] == 3
    assert rs.where(statuses={"ok", "agent_failure"}).keys == [("a", "s1", 0)]


def test_byte_order_mark_and_bad_lines(tmp_path):
    rs = RecordSet.scan(_write(tmp_path / "bom.jsonl", [_rec("a", "s1", m=1.0), _rec("a", "s2")], bom=True))
    assert rs[0]["session_id"] == "s1" and len(rs) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_rec("a", "s1")) + "\n{not json\n")
    with pytest.raises(ConvsimError, match="line 2"):
        RecordSet.scan(bad)
    nested = tmp_path / "deep.jsonl"
    nested.write_text('{"variant": "a", "session_id": "s", "x": ' + "[" * 150 + "]" * 150 + "}\n")
    with pytest.raises(ConvsimError, match="nested"):
        RecordSet.scan(nested)


def test_summary_hands_dataset_metrics_a_recordset_of_scored_sessions(tmp_path):
    _write(tmp_path / "results.jsonl", [_rec("a", "s1", m=1.0), _rec("a", "s2", status="simulator_failure", m=9.0),
                                        _rec("a", "s3", m=3.0)])
    seen = {}

    class Module:
        @staticmethod
        def dataset_metrics(records):
            seen["type"], seen["n"] = type(records), len(records)
            seen["twice"] = [r["session_id"] for r in records] + [r["session_id"] for r in records]
            return {"first": records[0]["session_id"]}

    summary = summarise_run(tmp_path, Module)
    assert seen == {"type": RecordSet, "n": 2, "twice": ["s1", "s3", "s1", "s3"]}
    assert summary["variants"]["a"]["dataset"] == {"first": "s1"}
    assert summary["variants"]["a"]["metrics"]["m"]["mean"] == 2.0  # the flagged session is not scored


def test_metric_table_streams_columns_with_gaps(tmp_path):
    recs = [_rec("a", "s1", x=1.0), _rec("a", "s2", y=2.0), _rec("b", "s1", x=3.0, y=None), _rec("b", "s2")]
    table = metric_table(RecordSet.scan(_write(tmp_path / "r.jsonl", recs)))
    assert table.names == ["x", "y"]
    assert table.values("x") == [1.0, None, 3.0, None] and table.values("y") == [None, 2.0, None, None]
    assert table.sessions == ["s1", "s2", "s1", "s2"] and table.by_variant("x") == {"a": {"s1#0": 1.0}, "b": {"s1#0": 3.0}}


def test_the_report_draws_failures_first_then_the_first_sessions_capped_per_variant(tmp_path):
    recs = [_rec(v, f"s{i:03d}", status="agent_failure" if i in (70, 90) else "ok", m=float(i))
            for v in ("a", "b") for i in range(100)]
    _write(tmp_path / "results.jsonl", recs)
    run = load_run(tmp_path)
    shown = shown_sessions(run.records, ["b", "a"], per_variant=5)
    keys = [(r["variant"], r["session_id"]) for r in shown]
    assert keys == [("b", s) for s in ("s000", "s001", "s002", "s070", "s090")] + \
        [("a", s) for s in ("s000", "s001", "s002", "s070", "s090")]
    assert len(shown_sessions(run.records, ["a", "b"])) == 100  # 50 per variant by default
    from convsim.evaluation.reporting.report import build_report
    html = build_report(tmp_path).read_text(encoding="utf-8")
    assert "Sessions (100 of 200)" in html and 'id="sessions-shown"' in html
    assert html.count('<details class="session"') == 100


def test_the_run_store_index_is_the_scan_of_what_it_wrote(tmp_path):
    """The runner's store keeps the index as it appends (after compacting an earlier attempt's file,
    BOM and dropped lines included), so the end-of-run summary reads no line back to index it: the
    index must be what RecordSet.scan finds in the file, record for record."""
    from convsim.running.store import RunStore
    earlier = [_rec("b", "s2", m=1.0), _rec("a", "s9", status="infra_error"), _rec("a", "s1", m=2.0),
               _rec("a", "s1", m=2.5), _rec("c", "s0", status="code_error")]
    for bom in (False, True):
        run_dir = tmp_path / f"run{bom}"
        run_dir.mkdir()
        path = _write(run_dir / "results.jsonl", earlier, bom=bom)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:2] + ["\u00a0 \n".encode()] + lines[2:]))  # a blank line (NBSP)
        store = RunStore(run_dir).open()  # compacts: drops the errors, the first a/s1 and the blank
        assert store.done() == {("a", "s1", 0), ("b", "s2", 0)}
        for rec in (_rec("a", "s9", m=3.0), _rec("c", "s0", status="agent_failure", m=0.0),
                    _rec("a", "s3", status="infra_error"), _rec("a", "s3", m=4.0, text="é ☕")):
            store.append(rec)
        store.close()
        own, scanned = store.record_set(), RecordSet.scan(run_dir / "results.jsonl")
        assert own._entries == scanned._entries and list(own) == list(scanned)
        assert own.keys == [("a", "s1", 0), ("a", "s3", 0), ("a", "s9", 0), ("b", "s2", 0), ("c", "s0", 0)]
        assert store.done() == set(own.keys)
