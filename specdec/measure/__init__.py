"""What the app and the CLI measure: timed runs, the rules on trial, samples and their statistics.
No Streamlit here; the pages and `python -m specdec` call these and show the results.

    timing.py           timed runs: races of any lanes, gamma sweeps, prompt sets, forward-pass costs,
                        where a round's time goes; the saved results of a prompt-set run
    drafter_race.py     which drafters the Variants page races on one prompt
    rules.py            the rule on trial: every acceptance rule sampled on one prompt, against the
                        target alone; the exact rule's acceptance over temperatures
    rule_expression.py  a student's own acceptance rule, read by a small safe evaluator
    exact.py            each rule's exact answer at one position beside the sampled one
    tree_trial.py       the multi-candidate rules (a tree's siblings) at one position: exact laws by
                        enumeration, beside samples and their acceptance
    tree_race.py        tree against chain on one prompt: the lanes raced, and each lane's figures
    guarantee.py        the rule on toy distributions, sampled outcomes, greedy equality
    batching.py         a class as a batch: target-only and speculative decoding of B rows, timed
    stack.py            the current pair in plain transformers, and the engines' configuration for it
    stats.py            total-variation distance, a chi-square test, Wilson intervals
    eta.py              time estimates from measurement: what a run will take
"""
