"""The lesson's core, in reading order:

    sampling.py      the warp (temperature, top-k, top-p) shared by both models
    acceptance.py    the acceptance rule, a pure function over tensors -> Verdict
    records.py       what a round leaves behind: plain records the app and the metrics read
    matmul.py        fp32 linear layers in whichever matrix layout this CPU runs faster
    cached_model.py  a model with a KV cache (and, if asked, its last hidden states) that can be
                     rolled back
    feature_head.py  a few decoder layers that draft from the target's hidden states (EAGLE)
    drafters.py      who proposes tokens: a draft model (stopping when unsure), a feature head,
                     n-gram prompt lookup, or lookup first and a model or head elsewhere
    stopwatch.py     named stages of the round loop, timed only while someone measures
    rounds.py        the round loop: draft, verify in one pass, accept, roll back both caches;
                     and the adaptive cap on the next round's drafts
    metrics.py       acceptance, tokens per pass, and the paper's expected speed-up
"""
