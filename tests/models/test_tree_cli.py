"""--tree on the command line: a tree round's JSON trace carries the tree, and a bad value is one line."""

import json

import pytest
from cli_runs import run_cli, tiny_args


@pytest.mark.slow  # a second or more: generation through the command line
def test_generate_json_carries_each_rounds_tree(capsys, tiny_pair_dirs):
    code, out, _ = run_cli(capsys, "generate", "--prompt", "def add(a, b):", "--json", "--tree", "5",
                           "--max-new-tokens", "10", "--temperature", "1", *tiny_args(tiny_pair_dirs))
    assert code == 0
    record = json.loads(out.splitlines()[0])
    assert sum(len(r["emitted_tokens"]) for r in record["rounds"]) == 10
    for round_ in record["rounds"]:
        tree = round_["tree"]
        assert len(tree["tokens"]) == len(tree["parents"]) and tree["parents"][0] == -1
        for sibling in tree["siblings"]:
            assert {"node", "candidates", "keep_chances", "uniforms", "kept", "token"} <= sibling.keys()


@pytest.mark.parametrize("command", ["generate", "bench", "rules"])
@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--tree", "wide", "tree must be 'off', 'auto' or a number of nodes"),
    ("--tree", "0", "tree must be 'off', 'auto' or a number of nodes"),
    ("--tree-rule", "greedy", "tree-rule must be one of without-replacement"),
])
def test_a_bad_tree_is_one_line_and_exit_2(capsys, tiny_pair_dirs, command, flag, value, message):
    code, _, err = run_cli(capsys, command, "--prompt", "x", flag, value, *tiny_args(tiny_pair_dirs))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
