"""A round made by hand (no model): three drafts, the first kept, the second rejected, with the
distributions each stage shows. Chart, quiz and student-mode tests read it; LABELS names its tokens."""

from specdec.core.records import RoundTrace, ShownDistribution

LABELS = {1: "␣the", 2: "cat", 3: "<b>bold</b>", 4: "dog"}


def position(residual=False, draft=True):
    return ShownDistribution(
        token_ids=[1, 2, 3, 4],
        target_probs=[0.5, 0.3, 0.15, 0.05],
        draft_probs=[0.1, 0.6, 0.2, 0.1] if draft else None,
        residual_probs=[0.8, 0.0, 0.0, 0.2] if residual else None,
    )


def trace(uniforms=(0.05, 0.9, 0.3), num_accepted=1, is_bonus=False):
    return RoundTrace(
        index=0, context_length=10, drafted_tokens=[1, 2, 3],
        positions=[position(), position(residual=not is_bonus), position(), position(draft=False)],
        draft_token_probs=[0.1, 0.6, 0.2], target_token_probs=[0.5, 0.3, 0.15],
        accept_probs=[1.0, 0.5, 0.75], uniforms=None if uniforms is None else list(uniforms),
        num_accepted=num_accepted, next_token=1, is_bonus=is_bonus, emitted_tokens=[1, 1],
        draft_seconds=0.01, verify_seconds=0.02,
    )
