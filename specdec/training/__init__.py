"""Training the bundled target's drafters, offline, on a CPU.

    data.py                 the draft's training data: the target's own answers, made offline
    campaign.py             the data campaign: many of the target's answers, with its features
    campaign_prompts.py     the campaign's prompts: many kinds, made by templates
    features.py             the target's features read whole (teacher forcing)
    losses.py               how far the draft's q is from the target's p (KL, total variation)
    train_draft.py          distil the small draft model
    train_feature_head.py   train the feature head (core.feature_head)
    train_exit.py           train the exit adapter after the target's first layers (core.early_exit)
    evaluate.py             a draft's cost next to the target's, and how closely it matches p
"""
