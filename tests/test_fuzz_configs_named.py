"""The fuzzed bad inputs that were still unclean: each is one line naming the config (and
the file it names), exit 2, nothing written."""
import csv
import json

import pytest
from cli_helpers import one_line

RUN = ["--sessions", "1", "--quiet", "--no-analysis"]


def test_a_plan_cell_whose_days_is_a_number(tmp_path):
    path = tmp_path / "plan_C3.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["speaker", "intent", "utterance", "plan"])
        w.writeheader()
        w.writerows([{"speaker": "Ann", "intent": "user_provide_cuisine", "utterance": "Thai"},
                     {"speaker": "system", "intent": "sys_present_plan", "utterance": "plan", "plan": '{"days": 5}'}])
    one_line(["eval", path], str(path), "line 3", "plan.days", "must be a list")  # was a TypeError traceback


@pytest.mark.parametrize("count", ["9" * 401, "1000001"])
def test_an_absurd_session_count_is_refused_with_its_cap(tmp_path, count):
    cfg = tmp_path / "big.yaml"
    cfg.write_text(f"graph: hello_chat\nsessions: {count}\n")
    one_line(["run", cfg, "--quiet", "--no-analysis", "--out", tmp_path / "runs"], str(cfg), "sessions", "1000000")
    one_line(["run", "hello_chat", "--sessions", "1000001", "--quiet", "--no-analysis", "--out", tmp_path / "runs"],
             "sessions", "1000000")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("graph,param,target,words", [
    ("customer_service", "dialogues_path", "nope.json", "cannot read dialogue file"),
    ("customer_service", "dialogues_path", ".", "folder holds no dialogues_*.json"),
    ("customer_service", "db_path", "nodb", "restaurant_db.json"),
    ("crs_shift", "catalog_path", "nope.json", "cannot read movie catalog"),
    ("course_retrieval", "test_set", "nope.json", "cannot read test set"),
    ("group_planning", "db_path", "nodb", "accommodations.json"),
])
def test_a_file_a_param_names_is_reported_with_the_config_that_named_it(tmp_path, graph, param, target, words):
    extra = "mode: replay, " if param == "dialogues_path" else ""
    ref = (tmp_path / target).resolve()
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"graph: {graph}\nparams: {{{extra}{param}: {json.dumps(str(ref))}}}\n")
    one_line(["run", cfg, *RUN, "--out", tmp_path / "runs"], str(cfg), f"params.{param}", str(ref), words)
    assert not (tmp_path / "runs").exists()
