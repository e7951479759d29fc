"""specdec: speculative decoding with a real draft/target pair, built to be looked at.

The engine, in reading order:
    sampling.py     the warp (temperature, top-k, top-p) shared by both models
    acceptance.py   the acceptance rule, a pure function over tensors
    drafters.py     who proposes tokens: a draft model, or n-gram prompt lookup
    rounds.py       the round loop: draft, verify in one pass, accept, roll back caches
    metrics.py      acceptance, tokens per pass, the paper's expected speed-up
and around it: models.py and pair.py (loading), generation.py (one run), bench.py, cli.py.
No Streamlit in here.
"""
