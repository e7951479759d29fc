"""The lesson's core, in reading order:

    sampling.py      the warp (temperature, top-k, top-p) shared by both models
    acceptance.py    the acceptance rule, a pure function over tensors -> Verdict
    records.py       what a round leaves behind: plain records the app and the metrics read
    cached_model.py  a model with a KV cache that can be rolled back
    drafters.py      who proposes tokens: a draft model, or n-gram prompt lookup
    rounds.py        the round loop: draft, verify in one pass, accept, roll back both caches
    metrics.py       acceptance, tokens per pass, and the paper's expected speed-up
"""
