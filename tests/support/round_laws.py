"""The round loop's output against the target's own law: the tokens a run emitted, and the exact law of
a target's first few tokens computed from target passes alone."""

from specdec.core.cached_model import CachedModel
from specdec.core.sampling import warp_probs

PROMPT = [5, 17, 42, 8, 99, 3]


def emitted(traces):
    return [t for trace in traces for t in trace.emitted_tokens]


def exact_target_law(target_model, vocab, prompt, warp, length):
    """{continuation: probability} of the target's first `length` tokens, from target passes alone."""
    law = {(): 1.0}
    for _ in range(length):
        longer = {}
        for prefix, mass in law.items():
            probs = warp_probs(CachedModel(target_model, vocab).extend([*prompt, *prefix])[-1:], warp)[0]
            for token in probs.nonzero().flatten().tolist():
                longer[(*prefix, token)] = mass * float(probs[token])
        law = longer
    return law
