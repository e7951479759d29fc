"""The lesson's core, in reading order. Nothing here makes a CPU fast: the matrix layouts, int8 drafts,
steps by hand and pass-cost timing live in specdec/kernels/, which the loader applies to a model; what
the engine needs from them is handed in when a run is made, as plain data (what a pass over n tokens
costs) and a callable (a draft's one-token step).

    sampling.py      the warp (temperature, top-k, top-p) shared by both models
    acceptance.py    the acceptance rule, a pure function over tensors -> Verdict; the other rules
    output_law.py    what a rule emits, exactly: the law of the token at one drafted position
    records.py       what a round leaves behind: plain records the app and the metrics read
    cached_model.py  a model with a KV cache (and, if asked, its last hidden states) that can be
                     rolled back; the output head cut to the tokens a draft scores
    feature_head.py  a few decoder layers that draft from the target's hidden states (EAGLE)
    early_exit.py    self-speculation: the target's own first L layers draft, on the target's own
                     cache, with an optional trained exit adapter (LayerSkip, Kangaroo)
    drafters.py      who proposes tokens: a draft model (stopping when unsure), a feature head,
                     n-gram prompt lookup, or lookup first and a model or head elsewhere
    tree_rule.py     several candidates at one position: drawn without replacement, judged in turn
                     against what the rejections leave (exact); the other multi-candidate rules
    tree_rounds.py   rounds that verify a tree of drafts in one pass and judge down it (Settings.tree):
                     a fixed shape, or one grown to fit each round
    tree_shape.py    which tree to draft: the likeliest nodes for their cost, from measured acceptance
    stopwatch.py     named stages of the round loop, timed only while someone measures
    rounds.py        the round loop: draft, verify in one pass, accept, roll back both caches;
                     and the adaptive cap on the next round's drafts
    metrics.py       acceptance, tokens per pass, and the paper's expected speed-up
    batch_cache.py, batch_drafters.py, batch_rounds.py
                     the same loop for several rows at once (a class served as one batch)
"""
