"""What the app measures and draws (no Streamlit here; the pages call these and show the results).

    lock.py       the one lock around the shared models
    tokens.py     tokens as readable labels
    stepper.py    one run stepped by hand: the round-by-round view's state
    timing.py     timed runs: races of any lanes, γ sweeps, prompt sets, forward-pass costs, where a
                  round's time goes
    draft_length.py  why a round drafted as many tokens as it did, in words
    kvcache.py    the two KV caches of a round, as cells to draw
    quiz.py       student mode: judging a prediction against the round
    links.py      shared links: settings read from a URL, every change said
    serving.py    which models a shared server may load, and loads that failed
    guarantee.py  the rule on toy distributions, sampled outcomes, greedy equality
    stats.py      total-variation distance, a chi-square test, Wilson intervals
    numbers.py    figures in 2-3 significant digits, p-values as a page writes them
    prompt_kinds.py  code vs prose in words: kinds of text, the quiz and its feedback
    charts/       pure chart builders, one module per page: records in, figures out
"""
