"""Sessions are planned lazily and pulled with a bounded number in flight; the store streams."""
import json
import tracemalloc

from convsim.config import config_from_dict
from convsim.running.plan import plan_run
from convsim.running.runner import run
from convsim.running.store import RunStore


def test_a_million_session_plan_allocates_nothing_per_session(tmp_path):
    # 1,000,000: the most sessions a config may ask for (an absurd count is refused with its cap)
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 1_000_000, "out_dir": str(tmp_path)})
    tracemalloc.start()
    try:
        plan = plan_run(cfg)
        units = plan.iter_units()
        first = [next(units) for _ in range(1000)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan.expected_total() == 1_000_000
    assert (first[0].session_id, first[-1].session_id) == ("s000", "s999")
    assert peak < 20_000_000  # an eager plan of 1M units would need hundreds of MB


def test_the_async_executor_keeps_at_most_concurrency_sessions_pulled(tmp_path, monkeypatch):
    from convsim.running import plan as plan_mod
    pulled, landed, ahead = [0], [0], []
    iter_units = plan_mod.Plan.iter_units

    def counting(self):
        for unit in iter_units(self):
            pulled[0] += 1
            ahead.append(pulled[0] - landed[0])
            yield unit
    append = RunStore.append

    def counting_append(self, record, *line):
        landed[0] += 1
        append(self, record, *line)
    monkeypatch.setattr(plan_mod.Plan, "iter_units", counting)
    monkeypatch.setattr(RunStore, "append", counting_append)
    cfg = config_from_dict({"graph": "hello_chat", "sessions": 40, "concurrency": 3, "out_dir": str(tmp_path),
                            "trace": False, "analysis": []})
    run(cfg, analyze=False)
    assert pulled[0] == landed[0] == 40
    assert max(ahead) <= 3  # never more sessions taken from the plan than workers


def test_a_line_cut_short_by_a_crash_is_dropped(tmp_path):
    good = json.dumps({"variant": "v", "session_id": "a", "status": "ok"})
    (tmp_path / "results.jsonl").write_text(good + "\n" + '{"variant": "v", "session_id": "b", "sta')
    assert [r["session_id"] for r in RunStore(tmp_path).records()] == ["a"]
    assert (tmp_path / "results.jsonl").read_text() == good + "\n"
    (tmp_path / "results.jsonl").write_text('{"variant": "v", "session_id": "only-a-fragment"')
    assert RunStore(tmp_path).records() == []
