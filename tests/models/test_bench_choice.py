"""bench's race between a few drafters, and the rule that picks the default drafter from its reports."""

from pathlib import Path

import pytest

from specdec.cli.bench import (
    TARGET_ONLY,
    default_method,
    parse_race,
    parse_race_lengths,
    parse_race_trees,
    race_methods,
)
from specdec.cli.bench_report import measured_best
from specdec.config import Settings
from specdec.errors import SpecDecError
from specdec.paths import BUNDLED_HEAD


def report(**sets: dict[str, float]) -> dict:
    """A bench report with only what the rule reads: per set, each row's ratio over the target alone."""
    return {"sets": {name: {"methods": {TARGET_ONLY: {"over_target_only": 1.0}} | {
        label: {"over_target_only": ratio} for label, ratio in rows.items()}} for name, rows in sets.items()}}


def test_the_fastest_on_code_wins_only_if_never_slower_than_the_target_anywhere():
    avx512 = report(code={"A": 1.6, "B": 1.5, "C": 1.9}, prose={"A": 1.2, "B": 1.1, "C": 1.3})
    avx2 = report(code={"A": 1.7, "B": 1.8, "C": 2.0}, prose={"A": 1.1, "B": 1.2, "C": 0.98})
    chosen, rows = measured_best([avx512, avx2])
    assert rows["C"]["worst"] == 0.98  # C is fastest on code, but slower than the target on prose there
    assert chosen == "A"  # A's lower code ratio (1.6) beats B's (1.5): a default must suit both machines
    assert measured_best([avx512])[0] == "C"  # with one machine's report only, C passes
    assert measured_best([report(code={"A": 0.9})])[0] is None


def test_the_default_stays_unless_another_row_leads_it_by_more_than_the_noise():
    runs = [report(code={"A": 1.55, "B": 1.57}, prose={"A": 1.2, "B": 1.2}),
            report(code={"A": 1.60, "B": 1.58}, prose={"A": 1.2, "B": 0.99})]
    for run in runs:
        run["default_method"] = "A"
    assert measured_best(runs[:1])[0] == "B"  # no margin: the faster row, by 0.02
    assert measured_best(runs[:1], keep_within=0.04)[0] == "A"  # 0.02 is inside the margin
    assert measured_best(runs[:1], keep_within=0.01)[0] == "B"  # outside it
    assert measured_best(runs, keep_within=0.04)[0] == "A"  # B is slower than the target on prose once
    runs[0]["default_method"] = runs[1]["default_method"] = "C"  # a default not in the reports keeps nothing
    assert measured_best(runs[:1], keep_within=0.04)[0] == "B"


def test_a_drafter_without_a_batched_form_is_never_chosen():
    """The default drafts for the batched page too, and a feature head has none: the bundled head is
    left out however fast it ran (the negative control: the same report with the head named as a
    draft model picks it)."""
    run = report(code={"lookup, draft": 1.57, "lookup, head": 1.62}, prose={"lookup, draft": 1.1,
                                                                         "lookup, head": 1.2})
    run["method_names"] = {"lookup, draft": "ngram+bundled:SmolLM2-135M-Instruct-draft, adaptive",
                           "lookup, head": f"ngram+{BUNDLED_HEAD}, adaptive"}
    assert measured_best([run])[0] == "ngram+bundled:SmolLM2-135M-Instruct-draft, adaptive"
    run["method_names"]["lookup, head"] = "ngram+some/draft-model, adaptive"
    assert measured_best([run])[0] == "ngram+some/draft-model, adaptive"


@pytest.mark.parametrize("head_label", ["n-gram, then head, adaptive", "feature head (new-head), γ fixed"])
def test_a_head_is_known_by_its_label_where_its_name_cannot_tell(head_label):
    """A report from before `method_names` names its rows by label, and a head's folder from another
    machine is not here to be read: the label still says "head" (the negative control: the same row
    labelled as a draft model's is chosen)."""
    run = report(code={"n-gram, then model, adaptive": 1.57, head_label: 1.62},
                 prose={"n-gram, then model, adaptive": 1.1, head_label: 1.2})
    chosen, rows = measured_best([run])
    assert chosen == "n-gram, then model, adaptive" and not rows[head_label]["batched"]
    run["method_names"] = {head_label: "ngram+heads/from-elsewhere, adaptive"}  # no such folder here
    assert measured_best([run])[0] == "n-gram, then model, adaptive"
    run["method_names"] = {}
    for entry in run["sets"].values():
        entry["methods"]["draft model, adaptive"] = entry["methods"].pop(head_label)
    assert measured_best([run])[0] == "draft model, adaptive"


def test_rows_pool_by_the_drafter_they_ran_not_by_their_label():
    """A lone draft model reads "n-gram, then model" whichever model it is: two races of two models
    must not pool into one row."""
    first = report(code={"n-gram, then model, adaptive": 1.7}, prose={"n-gram, then model, adaptive": 1.2})
    second = report(code={"n-gram, then model, adaptive": 1.5}, prose={"n-gram, then model, adaptive": 0.9})
    first["method_names"] = {"n-gram, then model, adaptive": "ngram+drafts/new, adaptive"}
    second["method_names"] = {"n-gram, then model, adaptive": "ngram+drafts/old, adaptive"}
    chosen, rows = measured_best([first, second])
    assert set(rows) == {"ngram+drafts/new, adaptive", "ngram+drafts/old, adaptive"}
    assert rows["ngram+drafts/new, adaptive"]["code"] == [1.7, None]  # per report, None where it did not run
    assert chosen == "ngram+drafts/new, adaptive"  # the old draft's slow prose is not held against it
    del first["method_names"], second["method_names"]  # reports from before names: pooled by label
    assert measured_best([first, second])[0] is None


def test_a_race_names_each_row_by_its_drafter_and_draft_length():
    methods = race_methods(["ngram+bundled:A", "bundled:B"], adaptive=True)
    assert [m.name for m in methods] == [TARGET_ONLY, "ngram+bundled:A, adaptive", "bundled:B, adaptive"]
    assert race_methods(["bundled:B"], adaptive=False)[1].name == "bundled:B, γ fixed"


def test_a_race_length_makes_a_row_of_its_own_and_never_the_default_row():
    methods = race_methods(["ngram+bundled:A"], adaptive=True,
                           lengths=[(3, 0.1, None), (5, None, None), (6, 0.1, False)])
    assert [m.label for m in methods[1:]] == ["n-gram, then model, adaptive",
                                              "n-gram, then model, adaptive, γ 3, threshold 0.1",
                                              "n-gram, then model, adaptive, γ 5",
                                              "n-gram, then model, adaptive, γ 6, threshold 0.1, passes free"]
    assert methods[2].name == "ngram+bundled:A, adaptive, γ 3, threshold 0.1"
    own = Settings(gamma=4, draft_threshold=0.2, adaptive=False)
    assert (methods[2].settings(own).gamma, methods[2].settings(own).draft_threshold) == (3, 0.1)
    assert methods[3].settings(own).draft_threshold == 0.2 and methods[1].settings(own).adaptive
    assert methods[2].settings(own).price_drafts and not methods[4].settings(own).price_drafts
    assert default_method(methods, "ngram+bundled:A", adaptive=True) == "n-gram, then model, adaptive"
    assert parse_race_lengths("3:0.1, 5,6:0.1:free") == [(3, 0.1, None), (5, None, None), (6, 0.1, False)]
    for bad in ("", "a", "3:x", "0", "3:1", "3:-0.1", "6:0.1:cheap", "6:0.1:free:x", "6::tree",
                "6::free:free"):
        with pytest.raises(SpecDecError):
            parse_race_lengths(bad)


def test_a_raced_tree_makes_a_row_of_its_own_beside_its_chain():
    methods = race_methods(["ngram+bundled:A"], adaptive=True, trees=parse_race_trees("off, AUTO,8"))
    assert [m.label for m in methods[1:]] == ["n-gram, then model, adaptive",
                                              "n-gram, then model, adaptive, tree off",
                                              "n-gram, then model, adaptive, tree auto",
                                              "n-gram, then model, adaptive, tree 8"]
    own = Settings(tree="4")
    assert [m.settings(own).tree for m in methods[1:]] == ["4", "off", "auto", "8"]
    assert default_method(methods, "ngram+bundled:A", adaptive=True) == "n-gram, then model, adaptive"
    for bad in ("", "wide", "auto,auto", "-1", "9999"):
        with pytest.raises(SpecDecError):
            parse_race_trees(bad)


def test_a_race_is_the_target_alone_and_each_drafter_at_one_draft_length():
    drafters = parse_race("ngram+bundled:A, bundled:B")
    assert drafters == ["ngram+bundled:A", "bundled:B"]
    methods = race_methods(drafters, adaptive=True)
    labels = [TARGET_ONLY, "n-gram, then model, adaptive", "draft model, adaptive"]
    assert [m.label for m in methods] == labels
    assert all(m.adaptive for m in methods[1:])
    assert race_methods(drafters, adaptive=False)[1].label == "n-gram, then model, γ fixed"
    for bad in ("", "a,,b", "a,a"):
        with pytest.raises(SpecDecError, match="--race"):
            parse_race(bad)


def test_a_race_names_a_model_beside_a_bundled_one_of_its_kind(tiny_pair_dirs):
    head = tiny_pair_dirs["head"]
    labels = [m.label for m in race_methods([f"ngram+{BUNDLED_HEAD}", f"ngram+{head}"], adaptive=True)]
    assert labels[1] == "n-gram, then head, adaptive" and Path(head).name in labels[2]
    with pytest.raises(SpecDecError, match="read alike"):  # one folder spelled two ways
        race_methods([head, f"{head}/"], adaptive=True)
