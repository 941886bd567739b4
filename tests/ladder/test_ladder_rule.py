"""The ladder's spec is checked before any work, and its mark goes to the cheapest student close to the teacher."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketbert.core.errors import ConfigError
from pocketbert.ladder.spec import available_ladders, check_ladder, read_ladder, rung_export
from pocketbert.ladder.table import IN_DOMAIN, cheapest_within

POINTS = 1.0  # the issue's bar: within one point of the teacher


def row(name, ms, mb, acc, imdb=None, ship=True):
    return {"rung": name, "ship": ship, "latency_ms": ms, "size_bytes": mb * 1e6 if mb else None, "accuracy": acc,
            "cross_domain": {} if imdb is None else {"imdb": imdb}}


TEACHER = {"accuracy": 0.88, "cross_domain": {"imdb": 0.76}}
ROWS = [row("default", 4.0, 17.6, 0.870, 0.742), row("narrow", 1.5, 11.4, 0.871, 0.733),
        row("tiny", 0.9, 9.0, 0.850, 0.755), row("static", 0.04, 8.0, 0.828, 0.692),
        row("control", None, None, 0.99, 0.99, ship=False), row("unbenched", None, 1.0, 0.875, 0.76)]


def test_the_mark_goes_to_the_cheapest_student_within_the_points():
    # narrow (0.871) is 0.9 points below 0.88 and faster than default; tiny is 3 points below; control is not shipped
    assert cheapest_within(ROWS, TEACHER, IN_DOMAIN, "latency_ms", POINTS) == "narrow"
    # by size, the unbenched rung has a file: it competes on size, not on latency
    assert cheapest_within(ROWS, TEACHER, IN_DOMAIN, "size_bytes", POINTS) == "unbenched"
    # on IMDb (teacher 0.76) tiny is within a point and the fastest such
    assert cheapest_within(ROWS, TEACHER, "imdb", "latency_ms", POINTS) == "tiny"
    assert cheapest_within(ROWS, TEACHER, IN_DOMAIN, "latency_ms", 0.5) is None
    exactly_one_point = [row("edge", 1.0, 1.0, 0.87)]
    assert cheapest_within(exactly_one_point, TEACHER, IN_DOMAIN, "latency_ms", POINTS) == "edge"


@pytest.mark.slow
def test_names_of_close_points_are_placed_apart():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pocketbert.ladder.table import place_labels

    fig, ax = plt.subplots()
    close = [(7.0, 0.709), (7.5, 0.6955), (8.0, 0.696), (7.2, 0.70), (100.0, 0.9)]  # four within a label's box
    ax.scatter(*zip(*close))
    for i, point in enumerate(close):
        ax.annotate(f"narrow-rung-{i}", point, xytext=(5, 4), textcoords="offset points", fontsize=8)
    boxes = place_labels(ax)
    plt.close(fig)
    assert len(boxes) == len(close)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_the_built_in_ladders_are_valid_and_hold_the_issues_rungs():
    assert {"reduced", "full"} <= set(available_ladders())
    for name in ("reduced", "full"):
        ladder = read_ladder(name)
        recipes = check_ladder(ladder, "sentiment")
        shapes = {(r.student.layers, r.student.hidden_size) for r in recipes.values() if r.student}
        assert {(4, 256), (3, 192), (2, 192)} <= shapes
        assert {r.distill.recipe for r in recipes.values()} >= {"layerwise", "tang", "static"}
        assert sum(r.in_run for r in ladder.rungs) == 1
        assert [r.student_init for r in ladder.rungs if not r.ship] == ["random", "random"]  # 4 x 256's, 2 x 192's


def test_the_qa_ladders_are_valid_and_score_every_rung_on_the_same_dev_questions():
    assert {"qa-reduced", "qa-full"} <= set(available_ladders())
    for name in ("qa-reduced", "qa-full"):
        ladder = read_ladder(name)
        recipes = check_ladder(ladder, "qa")
        assert {(r.student.layers, r.student.hidden_size) for r in recipes.values() if r.student} >= {(4, 256), (2, 192)}
        assert {r.dataset for r in recipes.values()} == {"squad"}
        # one dev sample for every rung: their F1s compare
        assert len({r.eval.max_examples for r in recipes.values()}) == 1, name
        # a fitted vocabulary, its recovery refused for QA
        assert all(rung_export(ladder, r)["vocabulary.recovery_steps"] == 0 for r in ladder.rungs if r.ship)


def test_a_rungs_own_keys_win_over_the_ladders_budget_and_null_means_every_sentence(tmp_path):
    path = tmp_path / "ladder.yaml"
    path.write_text("rungs: [{name: a, label: a, preset: narrow-192}, {name: b, label: b, preset: narrow-192, "
                    "set: {distill.max_train_examples: null, distill.epochs: 3}}]\n"
                    "train: {max_train_examples: 500, set: {distill.epochs: 2}}")
    recipes = check_ladder(read_ladder(str(path)), "sentiment")
    assert (recipes["a"].distill.max_train_examples, recipes["a"].distill.epochs) == (500, 2)
    assert (recipes["b"].distill.max_train_examples, recipes["b"].distill.epochs) == (None, 3)


def test_a_rungs_export_settings_win_over_the_ladders_and_the_rest_are_the_ladders():
    from pocketbert.ladder.flow import plan

    ladder = read_ladder("reduced")
    steps = {(s.rung, s.stage): s.args for s in plan(ladder, Path("runs/r"), Path("runs/r-ladder"), "sentiment", None,
                                                     "cpu", False).steps}
    bilstm, narrow = steps[("bilstm", "export")], steps[("narrow-192", "export")]
    assert "export.coreai_variants=[]" in bilstm
    assert f"export.coreai_variants=[{','.join(ladder.export.coreai_variants)}]" in narrow
    assert f"vocabulary.recovery_steps={ladder.vocabulary.recovery_steps}" in narrow  # the fit the export may run
    assert f"export.parity_examples={ladder.export.parity_examples}" in bilstm


def test_the_spec_digest_follows_what_makes_the_students_not_their_export():
    from pocketbert.ladder.flow import spec_digest

    ladder = read_ladder("reduced")
    exported = ladder.model_copy(deep=True)
    exported.rungs[1].export.parity_examples = 7
    exported.export.parity_examples = 9
    exported.rungs[1].vocabulary.recovery_steps = 3
    exported.vocabulary.min_count = 4
    trained = ladder.model_copy(deep=True)
    trained.rungs[1].set["distill.epochs"] = 5
    assert spec_digest(exported) == spec_digest(ladder) != spec_digest(trained)


@pytest.mark.parametrize("text, said", [
    ("rungs: [{name: a, label: a, preset: default}]", "rungs"),
    ("rungs: [{name: a, label: a, preset: default}, {name: a, label: b, preset: static}]", "given twice"),
    ("rungs: [{name: A_b, label: a, preset: default}, {name: b, label: b, preset: static}]", "folder name"),
    ("rungs: [{name: a, label: a, preset: nope}, {name: b, label: b, preset: static}]", "no preset 'nope'"),
    ("rungs: [{name: compare, label: a, preset: default}, {name: b, label: b, preset: static}]", "comparison"),
    ("rungs: [{name: a, label: a, preset: default, set: {distill.temprature: 2}}, {name: b, label: b, preset: static}]",
     "distill.temprature"),
    ("rungs: [{name: a, label: a, preset: default}, {name: b, label: b, preset: static}]\nbench: {set: {threads: [2]}}",
     "must include 1"),
    ("rungs: [{name: a, label: a, preset: default}, {name: b, label: b, preset: static}]\ntrain: {max_train_examples: 0}",
     "max_train_examples"),
    ("rungs: [{name: a, label: a, preset: default}, {name: b, label: b, preset: static}]\nbogus: 1", "bogus"),
])
def test_a_bad_ladder_is_refused_in_one_line_before_any_work(tmp_path, text, said):
    path = tmp_path / "ladder.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        check_ladder(read_ladder(str(path)), "sentiment")
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_a_step_killed_by_a_signal_stops_the_ladder_naming_it_and_an_interrupt_stays_one(tmp_path):
    import signal
    import sys

    from pocketbert.ladder.flow import LadderStepError, Step, run_plan

    def step(code_line: str) -> Step:
        return Step("narrow", "export", ["-c", code_line], tmp_path / "never-written")

    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    with pytest.raises(LadderStepError) as caught:
        run_plan([step(killed)], lambda line: None, command=[sys.executable])
    assert f"killed by signal {int(signal.SIGKILL)}" in str(caught.value) and "narrow" in str(caught.value)
    # SIG_DFL first: a process started in the background by a non-interactive shell inherits SIGINT ignored
    interrupted = "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGINT)"
    with pytest.raises(KeyboardInterrupt):
        run_plan([step(interrupted)], lambda line: None, command=[sys.executable])
