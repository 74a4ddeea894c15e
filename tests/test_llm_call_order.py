"""Model calls of parallel tasks are recorded in task order, not in the order their threads finish.

group_planning asks every member in parallel (LangGraph ``Send`` tasks in its thread pool); each call
was appended to the session's list when it returned, so ``llm_calls`` followed thread scheduling (an
audit saw the same config give two orders). Here the server delays each answer by a hash of the
request salted per run, so the two runs finish the members' calls in different orders."""
import hashlib
import json
import time

from convsim.config import config_from_dict
from convsim.runner import run
from fault_server import serve


def _calls(tmp_path, salt: str) -> list[dict]:
    def answer(request):
        digest = hashlib.sha256((salt + json.dumps(request["messages"])).encode()).digest()
        time.sleep(digest[0] / 255 * 0.03)
        return "Somewhere warm with good food, please."
    with serve(answer=answer) as server:
        cfg = config_from_dict({"graph": "group_planning", "sessions": 1, "out_dir": str(tmp_path),
                                "run_id": salt, "models": {"member": f"openai:fake@{server.url}"},
                                "trace": True, "analysis": []})
        run_dir = run(cfg, analyze=False)
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    return record["llm_calls"]


def test_parallel_member_calls_are_recorded_in_task_order(tmp_path):
    a, b = _calls(tmp_path, "a"), _calls(tmp_path, "b")
    parallel = [c for c in a if c["task"] is not None]
    assert len({c["task"] for c in parallel}) > 1  # the members' calls were Send tasks
    order = [(c["step"], c["node"], c["task"]) for c in a]
    assert order == sorted(order)
    assert [(c["purpose"], c["step"], c["task"]) for c in a] == [(c["purpose"], c["step"], c["task"]) for c in b]
