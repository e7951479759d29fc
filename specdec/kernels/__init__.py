"""The CPU's speed machinery, apart from the lesson: what the loader (specdec/models/loading.py,
models/feature_head_files.py, models/pair.py) applies to a model so that its passes cost less on a CPU. The
engine (specdec/core/) never imports it, and it imports only the lowest layer (specdec.clock, paths).

    matmul.py        linear layers in another matrix layout (columns, with halves of a long layer;
                     packed by oneDNN; MKL's packed product; a split of two by pass size), and a
                     draft's int8 weights
    choice.py        which layout and precision this machine runs a model fastest in, timed once per
                     machine and model at load; what a pass over 1, 2, ... tokens costs (the engine
                     prices drafts by these numbers)
    kept_timings.py  what choice.py timed, kept per machine and model in the cache folder, so a later
                     process reads it instead of timing again; busy timings are not kept
    decoder_step.py  a draft's (and a feature head's) one-token step through its layers by hand

Why a verification pass costs what it costs on a CPU, with the measurements behind each choice:
docs/explanation/cpu-pass-cost.md.
"""
