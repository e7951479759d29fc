"""What the app measures and draws (no Streamlit here; the pages call these and show the results).

    lock.py       the one lock around the shared models
    tokens.py     tokens as readable labels
    stepper.py    one run stepped by hand: the round-by-round view's state
    timing.py     timed runs: the live race, γ sweeps, prompt sets, forward-pass costs, drafters
    guarantee.py  the rule on toy distributions, sampled outcomes, greedy equality
    stats.py      total-variation distance and a chi-square test
    charts.py     pure chart builders: records in, Plotly figures out
"""
