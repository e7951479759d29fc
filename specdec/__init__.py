"""specdec: speculative decoding with a real draft/target pair, built to be looked at.

The package, layer by layer (each imports only from the layers above it in this list):
    errors.py, paths.py, config.py   one exception type; bundled names; every default and limit
    clock.py    the one clock every timing reads (it waits for a GPU's queue)
    model_names.py   model and drafter names checked before anything loads (no torch)
    core/       the lesson: sampling warp, acceptance rule, records, cached model, feature head, drafters,
                round loop, metrics and the expected speed-up
    kernels/    the CPU's speed machinery: matrix layouts, int8 drafts, steps by hand, pass-cost timing
                (models/ applies it at load; core/ never imports it)
    models/     loading a target and its drafter, checking that they pair, and running them
    serving/    one server, many students: the models' lock, which models a link may load
    classroom/  a class answering together: questions, class codes and keys, the store replicas share
    measure/    what the app and CLI measure: timed runs, rules on trial, samples, statistics
    views/      what the pages draw: stepped runs, KV-cache cells, quiz, links, charts
    training/   distilling the bundled target's draft model; training its feature head
    cli/        `python -m specdec ...`: generate, bench, train-draft, train-head, eval-draft
No Streamlit in here: the app (app.py, app_pages/) calls measure/, views/, serving/ and models/.
"""
