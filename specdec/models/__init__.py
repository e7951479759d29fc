"""Loading and pairing: a target and its drafter, checked to share a tokenizer, and the runs they make.

    loading.py   load a model by bundled name, Hugging Face id or folder; the bundled GGUF; dtypes
    feature_head_files.py  load and save a feature head (its layers; the embeddings and output head
                 are the target's)
    exit_files.py  load and save an early exit (early:L, or an exit adapter: its one layer; the rest
                 is the target's)
    pair.py      a target with its drafter, loaded once and shared read-only; prompts in and out
    batch_runs.py  one batch = one pair, B prompts: the batched API the CLI, bench and app use
    export.py    the trained draft outside specdec: a transformers folder, a GGUF for llama.cpp
    runs.py      one run = one pair, one prompt, one Settings, one seed: the API the CLI and app use
    startup.py   where a start goes: imports, loading, the machine's timings, the first token
"""
