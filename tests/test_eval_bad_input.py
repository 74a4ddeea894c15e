"""``convsim eval``'s bad input: one line naming the file, the record (line) and the field, exit 2,
no traceback, nothing written. Before, each of these was exit 0: eval overwrote the run it read
(or any other run), wrote records that break the run directory's rules, silently dropped or
ignored fields, statuses and options."""
import copy
import json
import types
from pathlib import Path

import pytest
import yaml

from convsim import ConvsimError
from convsim.providers.models import ModelUnavailable
from cli_helpers import cli, one_line

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "tests" / "data" / "group" / "external_C3_dialogue.csv"
FAST = ["--set", "topic_mode=keyword", "--no-analysis"]

# a run's own record (crs_shift), as results.jsonl holds it; only what eval reads
RUN_RECORD = {
    "run_id": "src", "variant": "default", "session_id": "s0", "trial": 0, "seed": 1, "status": "ok",
    "params": {"n_turns": 2},
    "transcript": [
        {"turn": 1, "speaker": "user", "text": "Can you suggest a good war film?",
         "meta": {"turn": 1, "focus_field": "genre", "focus_value": "War", "shift_event": False,
                  "constraints": {"genre": "War"}, "anchor": "Dunkirk", "hidden_targets": ["1917"]}},
        {"turn": 1, "speaker": "system", "text": "Try Saving Private Ryan, a war film.",
         "meta": {"rec_ids": ["Saving Private Ryan", "1917"]}}]}
IMPORTED = {"session_id": "d1", "turns": [
    {"speaker": "user", "text": "I'd like a war film.",
     "user_meta": {"focus_field": "genre", "focus_value": "War", "constraints": {"genre": "War"},
                   "shift_event": False, "anchor": "123"}},
    {"speaker": "system", "text": "Try Saving Private Ryan.", "top_k": ["123", "456"]}]}


def write_jsonl(path: Path, *records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def source_run(tmp_path: Path) -> Path:
    """A run directory as `convsim run crs_shift` leaves it (config.yaml beside results.jsonl)."""
    run_dir = tmp_path / "runs" / "src"
    write_jsonl(run_dir / "results.jsonl", RUN_RECORD)
    (run_dir / "config.yaml").write_text("name: src\ngraph: crs_shift\nparams: {n_turns: 2, topic_mode: keyword}\n")
    return run_dir


def snapshot(run_dir: Path) -> dict:
    return {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}


# --- defect 1: eval never overwrites a run --------------------------------------------------------

def test_eval_refuses_to_write_into_the_run_it_reads(tmp_path):
    src = source_run(tmp_path)
    before = snapshot(src)
    one_line(["eval", src / "results.jsonl", "--out", src.parent, "--run-id", src.name, "--no-analysis"], str(src), "field out",
             "read from", "choose another --out")
    assert snapshot(src) == before


@pytest.mark.parametrize("held", ["results.jsonl", "config.yaml"])
def test_eval_refuses_an_out_directory_that_holds_another_run(tmp_path, held):
    src = source_run(tmp_path)
    other = tmp_path / "runs" / "other"
    other.mkdir()
    (other / held).write_text("x\n")
    one_line(["eval", src / "results.jsonl", "--out", other.parent, "--run-id", "other", "--no-analysis"], str(other), "field out",
             f"holds another run ({held})")
    assert [p.name for p in other.iterdir()] == [held] and (other / held).read_text() == "x\n"


def test_eval_into_its_own_earlier_output_is_refused_and_the_default_names_the_source_run(tmp_path, monkeypatch):
    src = source_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli("eval", src / "results.jsonl", *FAST)[0] == 0
    out = tmp_path / "runs" / "eval-src"  # was runs/eval-results, the same for every run's results.jsonl
    first = snapshot(out)
    assert yaml.safe_load((out / "config.yaml").read_text())["name"] == "eval-src"
    one_line(["eval", src / "results.jsonl", *FAST], "eval-src", "holds another run", "choose another --out")
    assert snapshot(out) == first


def test_a_model_that_fails_mid_eval_leaves_no_run_so_the_same_command_runs_again(tmp_path, monkeypatch):
    import convsim.evaluation.reporting.transcripts as tr
    real = tr.load_graph_module("crs_shift")
    broken = types.ModuleType("crs_shift")
    broken.__dict__.update(real.__dict__)

    def unavailable(transcript, ctx):
        raise ModelUnavailable("judge: connection refused")
    broken.evaluate_transcript = unavailable
    path, out = write_jsonl(tmp_path / "t.jsonl", IMPORTED), tmp_path / "runs" / "ev"
    monkeypatch.setattr(tr, "load_graph_module", lambda name: broken)
    with pytest.raises(ModelUnavailable, match="run the same command again"):
        tr.evaluate_transcripts(path, out=out.parent, run_id=out.name, params={"topic_mode": "keyword"}, analyze=False)
    assert not (out / "config.yaml").exists() and not (out / "results.jsonl").exists()
    monkeypatch.setattr(tr, "load_graph_module", lambda name: real)
    tr.evaluate_transcripts(path, out=out.parent, run_id=out.name, params={"topic_mode": "keyword"}, analyze=False)
    assert (out / "config.yaml").exists() and len((out / "results.jsonl").read_text().splitlines()) == 1


# --- defect 2: a run's records are checked as a run writes them -----------------------------------

def _turn(i, **changes):
    def change(rec):
        rec["transcript"][i].update(changes)
        return rec
    return change


def _drop_turn_number(rec):
    del rec["transcript"][1]["turn"]
    return rec


RUN_RECORD_DEFECTS = [
    (lambda r: {**r, "session_id": "../x"}, "session_id", "one path component"),
    (lambda r: {**r, "session_id": ""}, "session_id", "one path component"),
    (lambda r: {**r, "variant": "a/b"}, "variant", "one path component"),
    (lambda r: {**r, "variant": None}, "variant", "must be a string"),
    (lambda r: {**r, "status": "bogus"}, "status", "must be one of ok, agent_failure"),
    (lambda r: {**r, "transcript": []}, "transcript", "non-empty"),
    (_turn(0, speaker="martian"), "transcript[0].speaker", "'martian'"),
    (_drop_turn_number, "transcript[1].turn", "turn number"),
    (lambda r: {**r, "params": {"n_turnz": 3}}, "params.n_turnz", "unknown param 'n_turnz'"),
    (lambda r: {**r, "params": "n_turns=3"}, "params", "must be an object"),
    (_turn(0, meta={**RUN_RECORD["transcript"][0]["meta"], "shift_event": "yes"}),
     "transcript[0].meta.shift_event", "true or false"),
]


@pytest.mark.parametrize("mutate,field,words", RUN_RECORD_DEFECTS,
                         ids=[d[1] + "-" + str(i) for i, d in enumerate(RUN_RECORD_DEFECTS)])
def test_a_run_record_that_breaks_the_run_rules_is_one_line(tmp_path, mutate, field, words):
    path = write_jsonl(tmp_path / "r.jsonl", RUN_RECORD, {**mutate(copy.deepcopy(RUN_RECORD)), "session_id": "s1"}
                       if field != "session_id" else mutate(copy.deepcopy(RUN_RECORD)))
    one_line(["eval", path, "--out", tmp_path, "--run-id", "ev", *FAST], str(path), "record line 2", f"field {field}:", words)
    assert not (tmp_path / "ev").exists()


def test_record_params_are_checked_beside_a_config_too(tmp_path):
    src = source_run(tmp_path)
    write_jsonl(src / "results.jsonl", {**RUN_RECORD, "params": {"n_turnz": 3}})
    one_line(["eval", src / "results.jsonl", "--out", tmp_path, "--run-id", "ev", "--no-analysis"],
             "record line 1", "field params.n_turnz")


def test_record_params_are_used_without_a_config_and_must_agree_within_a_variant(tmp_path):
    from convsim.evaluation.reporting.transcripts import evaluate_transcripts
    path = write_jsonl(tmp_path / "r.jsonl", {**RUN_RECORD, "params": {"topic_mode": "keyword", "tau": 0.5}})
    out = evaluate_transcripts(path, out=tmp_path / "ev", analyze=False)
    (row,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert row["params"]["tau"] == 0.5 and row["variant"] == "default"  # before: the record's params were dropped
    path = write_jsonl(tmp_path / "r2.jsonl", {**RUN_RECORD, "params": {"tau": 0.5}},
                       {**RUN_RECORD, "session_id": "s1", "params": {"tau": 0.6}})
    one_line(["eval", path, "--out", tmp_path, "--run-id", "ev2", *FAST], "record line 2", "field params",
             "differ from those of line 1")


def test_unfinished_attempts_are_still_skipped_with_a_warning(tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", RUN_RECORD, {**RUN_RECORD, "session_id": "s1", "status": "infra_error"},
                       {**RUN_RECORD, "session_id": "s2", "status": "code_error"})
    code, out, _ = cli("eval", path, "--out", tmp_path, "--run-id", "ev", "-q", *FAST)
    assert code == 0
    # the warning is printed too (before: only in summary.json), and -q leaves out the summary table
    assert "warning: " in out and "2 unfinished attempt(s)" in " ".join(out.split()) and "results in" not in out
    rows = (tmp_path / "ev" / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["session_id"] for x in rows] == ["s0"]
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert any("2 unfinished attempt(s)" in w for w in summary["warnings"])


# --- defect 3: options that do not apply are refused; --embedder applies to JSONL ------------------

@pytest.mark.parametrize("option", [["--set", "foo=1"], ["--model", "judge=none"], ["--graph", "hello_chat"],
                                    ["--out", "DIR"]])
def test_options_that_do_not_apply_to_a_dialogue_csv(tmp_path, option):
    option = [str(tmp_path / "out") if x == "DIR" else x for x in option]
    one_line(["eval", CSV, *option], str(CSV), f"field {option[0][2:]}",
             f"{option[0]} does not apply to a group-planning dialogue CSV")
    assert not (tmp_path / "out").exists()


def test_embedder_applies_to_jsonl(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", IMPORTED)
    one_line(["eval", path, "--out", tmp_path, "--run-id", "e1", "--embedder", "bogus", *FAST], "field embedder",
             "unknown embedder 'bogus'")
    one_line(["eval", path, "--out", tmp_path, "--run-id", "e1", "--embedder", f"st:{tmp_path / 'nope'}", *FAST],
             "field embedder", "no sentence-transformers model directory")
    assert not (tmp_path / "e1").exists()
    # the source run's embedder is the default; the written config says which was used
    src = source_run(tmp_path)
    (src / "config.yaml").write_text((src / "config.yaml").read_text() + f"embedder: st:{tmp_path / 'gone'}\n")
    one_line(["eval", src / "results.jsonl", "--out", tmp_path, "--run-id", "e2", "--no-analysis"],
             str(src / "config.yaml"), "field embedder")
    assert cli("eval", path, "--out", tmp_path, "--run-id", "e3", "--embedder", "tfidf", *FAST)[0] == 0
    assert yaml.safe_load((tmp_path / "e3" / "config.yaml").read_text())["embedder"] == "tfidf"


# --- defect 4: the import format's fields are typed as docs/analysis.md defines them -------------

def _meta(**changes):
    rec = copy.deepcopy(IMPORTED)
    rec["turns"][0]["user_meta"].update(changes)
    return rec


def _system(**changes):
    rec = copy.deepcopy(IMPORTED)
    rec["turns"][1].update(changes)
    return rec


IMPORT_DEFECTS = [
    (_meta(shift_event="yes"), "turns[0].user_meta.shift_event", "true or false"),
    (_meta(focus_field="colour"), "turns[0].user_meta.focus_field", "must be one of genre"),
    (_meta(focus_value=7), "turns[0].user_meta.focus_value", "must be a string"),
    (_meta(constraints={"genre": ["War"]}), "turns[0].user_meta.constraints.genre", "must be a string"),
    (_meta(constraints={"colour": "red"}), "turns[0].user_meta.constraints.colour", "must be one of genre"),
    (_meta(anchor={"id": 1}), "turns[0].user_meta.anchor", "item id"),
    (_meta(hidden_targets="123"), "turns[0].user_meta.hidden_targets", "list of item ids"),
    (_system(top_k=[1, {"a": 1}]), "turns[1].top_k", "list of item ids"),
    (_system(user_meta={}), "turns[1].user_meta", "a user turn's"),
    (_system(topk=["1"]), "turns[1].topk", "unknown key 'topk'"),
    ({**IMPORTED, "sesion_id": "d1"}, "sesion_id", "unknown key 'sesion_id'"),
    ({**IMPORTED, "session_id": "a/b"}, "session_id", "one path component"),
    ({**IMPORTED, "variant": 3}, "variant", "must be a string"),
]


@pytest.mark.parametrize("record,field,words", IMPORT_DEFECTS,
                         ids=[f"{d[1]}-{i}" for i, d in enumerate(IMPORT_DEFECTS)])
def test_an_ill_typed_imported_record_is_one_line(tmp_path, record, field, words):
    path = write_jsonl(tmp_path / "t.jsonl", {**IMPORTED, "session_id": "ok"}, record)
    one_line(["eval", path, "--out", tmp_path, "--run-id", "ev", *FAST], str(path), "record line 2", f"field {field}:", words)
    assert not (tmp_path / "ev").exists()


def test_the_documented_import_format_still_reads(tmp_path):
    from convsim.evaluation.reporting.transcripts import read_transcripts
    rec = _system(top_k=["123", 456])  # integer ids are read as strings
    rec["session_id"] = 7
    rec["turns"].append({"speaker": "user", "text": ""})  # turns need not alternate; text may be empty
    rec["turns"].append({"speaker": "user", "text": "and a comedy?"})
    (got,) = read_transcripts(write_jsonl(tmp_path / "t.jsonl", rec))
    assert got["session_id"] == "7" and got["transcript"][1]["meta"] == {"rec_ids": ["123", "456"]}
    assert [t["turn"] for t in got["transcript"]] == [1, 1, 2, 3]


def test_read_transcripts_errors_are_convsim_errors(tmp_path):
    from convsim.evaluation.reporting.transcripts import read_transcripts
    with pytest.raises(ConvsimError) as err:
        read_transcripts(write_jsonl(tmp_path / "t.jsonl", _meta(focus_value=7)))
    assert err.value.record == "line 1" and err.value.field == "turns[0].user_meta.focus_value"
