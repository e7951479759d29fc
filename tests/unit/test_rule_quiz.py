"""Student mode's reasons under the other rules: each names that rule's own test."""

from dataclasses import replace

from hand_traces import trace

from specdec.views.quiz import reason


def test_reasons_name_each_rules_own_test():
    typical = replace(trace(uniforms=None), rule="typical", thresholds=[0.09, 0.4, 0.05],
                      accept_probs=[1.0, 0.0, 1.0])
    assert reason(typical, 0) == "kept: p(x)=0.50 is above the bar 0.09"
    assert reason(typical, 1) == "rejected: p(x)=0.30 is not above the bar 0.40"
    compare = replace(trace(uniforms=None), rule="sample-compare", target_draws=[1, 4, 2])
    assert reason(compare, 0) == "kept: the target drew this very token (chance p(x)=0.50)"
    assert reason(compare, 1) == "rejected: the target drew another token (x had chance p(x)=0.30)"
    assert reason(compare, 2).startswith("never tested")
    top = replace(trace(uniforms=None), rule="top-choice")
    assert reason(top, 1, target_top="dog") == "rejected: the target's most likely token (dog) is another one"
