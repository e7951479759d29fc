"""One source of defaults and limits. The CLI's flags, the app's sidebar and bench all read them here.

Each setting is a dataclass field with its default, a one-line help and, where the app offers a
slider or box for it, the range it offers (`ui_range`). The engine itself accepts any value its
check (`__post_init__`) allows: the CLI may ask for γ = 12, the sidebar stops at 8.

No torch here, so `python -m specdec --help` answers at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from specdec.errors import SpecDecError


def setting(default, help: str, ui_range: tuple | None = None):  # noqa: A002 - argparse's word
    """A dataclass field carrying its help text and the range the app offers for it."""
    return field(default=default, metadata={"help": help, "ui_range": ui_range})


def help_of(cls, name: str) -> str:
    return next(f.metadata.get("help", "") for f in fields(cls) if f.name == name)


def ui_range(cls, name: str) -> tuple:
    return next(f.metadata["ui_range"] for f in fields(cls) if f.name == name)


def _finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise SpecDecError(f"{name} must be a finite number, got {value}")


# The acceptance rules (core.acceptance.RULES holds them): speculative sampling is the engine's own.
SPECULATIVE, TOP_CHOICE, SAMPLE_COMPARE, TYPICAL = "speculative", "top-choice", "sample-compare", "typical"
RULE_NAMES = (SPECULATIVE, TOP_CHOICE, SAMPLE_COMPARE, TYPICAL)
LOSSY_RULES = (TOP_CHOICE, TYPICAL)  # not distributed as the target at T > 0

# Rules for several candidates at one position, a tree's siblings (core.tree_rule.TREE_RULES holds them):
# without replacement is the engine's own.
WITHOUT_REPLACEMENT, WITH_REPLACEMENT = "without-replacement", "with-replacement"
Q_KEPT, TOP_K_AS_SAMPLED = "q-kept", "top-k-as-sampled"
TREE_RULE_NAMES = (WITHOUT_REPLACEMENT, WITH_REPLACEMENT, Q_KEPT, TOP_K_AS_SAMPLED)
LOSSY_TREE_RULES = (Q_KEPT, TOP_K_AS_SAMPLED)

# Settings.tree: a chain, a tree each round grows to fit, or a tree of N drafted nodes.
TREE_OFF, TREE_AUTO, MAX_TREE_NODES = "off", "auto", 64


def tree_nodes(tree: str) -> int | None:
    """Settings.tree as a number of drafted nodes: 0 for 'off', None for 'auto' (SpecDecError otherwise)."""
    text = str(tree).strip().lower()
    if text in (TREE_OFF, TREE_AUTO):
        return 0 if text == TREE_OFF else None
    if not text.isdigit() or not 1 <= int(text) <= MAX_TREE_NODES:
        raise SpecDecError(f"tree must be 'off', 'auto' or a number of nodes from 1 to {MAX_TREE_NODES}, "
                           f"got {tree!r}")
    return int(text)


# What a draft's training may lower (training/losses.py): forward KL, total variation, or their mean.
DRAFT_LOSSES = ("kl", "tvd", "mix")

# The data campaign's goal (`python -m specdec campaign`): about ten times the 1,501 answers the shipped
# feature head was trained on.
CAMPAIGN_GOAL = 16_000


@dataclass(frozen=True)
class SamplingConfig:
    """How tokens are chosen. Temperature 0 means greedy (argmax), an explicit branch of its own."""

    temperature: float = setting(1.0, "0 = greedy; otherwise logits are divided by it", (0.0, 2.0))
    top_k: int = setting(0, "keep the k most likely tokens; 0 = keep all", (0, 1000))
    top_p: float = setting(1.0, "keep the smallest set with this much mass; 1 = keep all", (0.05, 1.0))

    def __post_init__(self) -> None:
        _finite("temperature", self.temperature)
        _finite("top-p", self.top_p)
        if not self.temperature >= 0:
            raise SpecDecError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise SpecDecError(f"top-k must be >= 0 (0 disables it), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise SpecDecError(f"top-p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Settings:
    """One run's settings: everything but the models and the prompt."""

    # γ in the paper: the cap on drafted tokens per round. A round may draft fewer (an n-gram
    # drafter without a match, or the end of the token budget); see RoundTrace.num_drafted.
    # 6 and draft threshold 0.1: chosen by bench races on both CPU kinds (docs/LOG.md, "Packed weights,
    # and longer drafts"), and held at T = 1, where no other pair won beyond noise (docs/LOG.md, "Draft
    # length and threshold at T = 1"): one pair for every temperature.
    gamma: int = setting(6, "the most tokens drafted per round (γ)", (1, 8))
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    max_new_tokens: int = setting(64, "tokens to generate at most", (1, 256))
    seed: int = setting(0, "seed of the run's own random generator", (0, 2**31 - 1))
    adaptive: bool = setting(True, "adapt the draft length: stop drafting when the draft grows unsure, "
                             "and move the cap with acceptance (γ stays the ceiling)")
    draft_threshold: float = setting(0.1, "adaptive: stop drafting when the chance that every draft so "
                                     "far survives (the product of the draft's top probabilities) "
                                     "falls below this, the price of a drafting step in target passes "
                                     "(plus what the draft adds to the verification pass: "
                                     "--price-drafts); the first draft's step is already paid",
                                     (0.0, 0.9))
    rule: str = setting(SPECULATIVE, "the acceptance rule: speculative (exact), top-choice (lossy), "
                        "sample-compare (exact, accepts less), typical (Medusa's; lossy)")
    price_drafts: bool = setting(True, "adaptive: add to the threshold what each draft adds to the target's "
                                 "verification pass on this machine (timed at load); off: passes over a "
                                 "few tokens count as free")
    tree: str = setting(TREE_OFF, "verify a tree of drafts in one target pass, at any temperature: "
                        "'off' (a chain), 'auto' (each round grows its own from the draft's confidence, "
                        "priced by this machine's passes) or N (a tree of N drafted nodes, shaped by "
                        "measured acceptance); a draft model drafts it")
    tree_rule: str = setting(WITHOUT_REPLACEMENT, "how a tree's siblings are drawn and judged: "
                             "without-replacement (exact), with-replacement (exact, SpecInfer), q-kept and "
                             "top-k-as-sampled (both lossy)")

    def __post_init__(self) -> None:
        tree_nodes(self.tree)  # refuses a bad value in one line
        if self.tree_rule not in TREE_RULE_NAMES:
            names = ", ".join(TREE_RULE_NAMES)
            raise SpecDecError(f"tree-rule must be one of {names}, got {self.tree_rule!r}")
        if self.rule not in RULE_NAMES:
            raise SpecDecError(f"rule must be one of {', '.join(RULE_NAMES)}, got {self.rule!r}")
        _finite("draft-threshold", self.draft_threshold)
        if not 0 <= self.draft_threshold < 1:
            raise SpecDecError(f"draft-threshold must be in [0, 1), got {self.draft_threshold}")
        if self.gamma < 1:
            raise SpecDecError(f"gamma must be >= 1, got {self.gamma}")
        if self.max_new_tokens < 1:
            raise SpecDecError(f"max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.seed < 0:
            raise SpecDecError(f"seed must be >= 0, got {self.seed}")


@dataclass(frozen=True)
class DraftTrainingConfig:
    """Distilling the bundled target's draft (`python -m specdec train-draft`)."""

    layers: int = setting(2, "transformer layers in the draft (the target has 30); with "
                             "--start-from-shipped, more than the shipped draft's adds layers before its "
                             "last, each starting as the identity")
    samples_per_prompt: int = setting(2, "answers the target writes per training prompt")
    max_new_tokens: int = setting(192, "answer length cap while making data")
    generation_batch: int = setting(32, "answers sampled together (one data shard)")
    label_top_k: int = setting(32, "target tokens kept per position as the distillation label")
    batch_size: int = setting(8, "answers per training step")
    learning_rate: float = setting(1e-3, "peak learning rate (AdamW)")
    minutes: float = setting(60.0, "training time budget (making data not included)")
    max_steps: int = setting(100_000, "training steps at most: a budget too (the learning rate falls over "
                                      "the last part of whichever runs out first), one the machine's load "
                                      "does not change")
    eval_every: int = setting(100, "steps between held-out evaluations and checkpoints")
    eval_tokens: int = setting(96, "length of the target's greedy answers to the evaluation prompts")
    max_shards: int = setting(0, "use only the first N data shards (0 = all): for tiny test runs")
    stdlib_blocks: int = setting(1600, "standard-library functions/classes the target reads (0 = none)")
    stdlib_batch: int = setting(16, "standard-library blocks per data shard")
    stdlib_max_tokens: int = setting(320, "a standard-library block's length cap, in tokens")
    decay_fraction: float = setting(0.3, "the learning rate falls linearly to 10% over this last part")
    head_tokens: int = setting(8192, "tokens the draft's reduced head scores (FR-Spec); 0 = all")
    campaign: bool = setting(False, "train on the data campaign's answers (python -m specdec campaign), "
                                    "labelled from its stored features, instead of making answers")
    greedy: bool = setting(False, "with --campaign: the greedy campaign's answers (campaign --greedy), the "
                                  "text T = 0 drafting meets, not the sampled ones")
    answers: int = setting(0, "with --campaign: its first N answers only (0 = all): to train on the data "
                              "a campaign held at an earlier size")
    code_share: float = setting(0.0, "the share of each step's answers drawn from code answers (0: as the "
                                     "data has them); with --campaign")
    start_from_shipped: bool = setting(False, "start from the shipped draft's layers and keep its token "
                                              "list, not the target's first and last layers")
    argmax_weight: float = setting(0.0, "the share of each label put on the target's top token (a hard "
                                        "label mixed into its top-k): at T = 0 a draft is kept when its top "
                                        "token is the target's")
    loss: str = setting("kl", "what the draft learns to lower (specdec/training/losses.py): kl "
                              "(cross-entropy against the target's top-k), tvd (total variation, "
                              "1 - Σ min(p, q): the chance a draft is rejected at T = 1), mix (their mean)")
    greedy_answers: int = setting(0, "with --campaign (its sampled answers): also the greedy campaign's "
                                     "first N answers, the text T = 0 drafting meets (0 = none)")

    def __post_init__(self) -> None:
        _check_answers(self.answers, self.campaign)
        _check_code_share(self.code_share, self.campaign)
        _check_greedy(self.greedy, self.campaign)
        _finite("argmax-weight", self.argmax_weight)
        if not 0 <= self.argmax_weight <= 1:
            raise SpecDecError(f"argmax-weight must be in [0, 1], got {self.argmax_weight}")
        if self.loss not in DRAFT_LOSSES:
            raise SpecDecError(f"loss must be one of {', '.join(DRAFT_LOSSES)}, got {self.loss!r}")
        if self.greedy_answers < 0 or (self.greedy_answers and (not self.campaign or self.greedy)):
            raise SpecDecError("--greedy-answers adds greedy answers to the sampled campaign's: a number "
                               ">= 0, with --campaign and without --greedy")


@dataclass(frozen=True)
class HeadTrainingConfig:
    """Training the bundled target's feature head (`python -m specdec train-head`)."""

    layers: int = setting(1, "decoder layers in the head (with --start-from-draft: the draft's, 2)")
    start_from_draft: bool = setting(False, "start from the shipped draft's layers, not the target's last "
                                            "ones: the head begins as that draft and learns to read features")
    max_new_tokens: int = setting(160, "answer length cap while making data")
    generation_batch: int = setting(64, "answers sampled together (one data shard)")
    max_shards: int = setting(0, "use only the first N data shards (0 = all): for tiny test runs")
    campaign: bool = setting(False, "train on the data campaign's answers and features (python -m specdec "
                                    "campaign) instead of making answers to the draft's prompts")
    answers: int = setting(0, "with --campaign: its first N answers only (0 = all): for the scaling curve")
    greedy: bool = setting(False, "with --campaign: the greedy campaign's answers (campaign --greedy), the "
                                  "text T = 0 drafting meets, not the sampled ones")
    start_from_head: bool = setting(False, "start from the shipped head (and train it on), not a new one")
    start_head_folder: str = setting("", "with --start-from-head: start from the head in this folder (one "
                                         "train-head wrote), not the shipped one")
    code_share: float = setting(0.0, "with --campaign: the share of each step's answers drawn from its code "
                                     "answers (0: as the data has them, a third)")
    feature_batch: int = setting(16, "answers per teacher-forced pass that computes the target's features")
    batch_size: int = setting(8, "answers per training step")
    unroll: int = setting(3, "drafting steps trained per position (later ones read the head's own features)")
    feature_weight: float = setting(0.1, "weight of the feature regression next to the cross-entropy")
    learning_rate: float = setting(5e-4, "peak learning rate (AdamW)")
    warmup_steps: int = setting(0, "steps over which the learning rate rises from 0 (for a trained start)")
    minutes: float = setting(40.0, "training time budget (making data not included)")
    max_steps: int = setting(100_000, "training steps at most: a budget too (the learning rate falls over "
                                      "the last 30 % of whichever runs out first), one the machine's load "
                                      "does not change")
    eval_every: int = setting(100, "steps between held-out evaluations and checkpoints")
    eval_tokens: int = setting(96, "length of the target's greedy answers to the evaluation prompts")

    def __post_init__(self) -> None:
        _check_answers(self.answers, self.campaign)
        _check_code_share(self.code_share, self.campaign)
        _check_greedy(self.greedy, self.campaign)
        if self.start_from_head and self.start_from_draft:
            raise SpecDecError("start from the shipped head or from the draft, not both")
        if self.start_head_folder and not self.start_from_head:
            raise SpecDecError("--start-head-folder names the head to start from: with --start-from-head")


@dataclass(frozen=True)
class ExitTrainingConfig:
    """Training the bundled target's exit adapter (`python -m specdec train-exit`)."""

    exit_layer: int = setting(4, "the target's layers the exit drafts with: the adapter reads layer "
                                     "L's output")
    batch_size: int = setting(8, "answers per training step")
    train_layers: bool = setting(True, "train the adapter's decoder layers too, not only the projection of "
                                       "layer L's state (their start, the draft's, stays as it is)")
    learning_rate: float = setting(3e-4, "peak learning rate (AdamW)")
    warmup_steps: int = setting(20, "steps over which the learning rate rises from 0")
    minutes: float = setting(25.0, "training time budget")
    max_steps: int = setting(100_000, "training steps at most (the learning rate falls over the last 30 % "
                                      "of whichever budget runs out first)")
    eval_every: int = setting(50, "steps between evaluations and checkpoints")
    eval_shards: int = setting(2, "the greedy campaign's last fp32 shards kept out of training, to "
                                     "evaluate on")
    eval_answers: int = setting(48, "answers of those evaluated on")

    def __post_init__(self) -> None:
        if self.exit_layer < 1 or self.batch_size < 1 or self.eval_every < 1 or self.minutes <= 0:
            raise SpecDecError("--exit-layer, --batch-size and --eval-every must be at least 1, --minutes "
                               "above 0")
        if not 1 <= self.eval_shards < 118 or self.eval_answers < 1:
            raise SpecDecError("--eval-shards must be 1 to 117 and --eval-answers at least 1")


def _check_answers(answers: int, campaign: bool) -> None:
    if answers < 0 or (answers and not campaign):
        raise SpecDecError("--answers counts the campaign's answers: a number >= 0, with --campaign")


def _check_greedy(greedy: bool, campaign: bool) -> None:
    if greedy and not campaign:
        raise SpecDecError("--greedy picks the greedy campaign's answers: with --campaign")


def _check_code_share(code_share: float, campaign: bool) -> None:
    if not 0 <= code_share < 1 or (code_share and not campaign):
        raise SpecDecError("--code-share is a share of the campaign's answers: from 0 to below 1, "
                           "with --campaign")


@dataclass(frozen=True)
class ServerLimits:
    """How one app server shares its models among sessions. Environment variables override each."""

    max_prompt_chars: int = setting(12_000, "the longest prompt the app accepts, in characters")
    prefill_chunk: int = setting(128, "prompt tokens per prefill pass: another session waits at most one")
    max_live_runs: int = setting(32, "Round-by-round runs whose KV caches are kept; past it, the run idle "
                                     "longest frees its caches and replays its rounds if stepped again")

    ENVIRONMENT = {"max_prompt_chars": "SPECDEC_MAX_PROMPT_CHARS", "prefill_chunk": "SPECDEC_PREFILL_CHUNK",
                   "max_live_runs": "SPECDEC_MAX_LIVE_RUNS"}

    @classmethod
    def from_environment(cls, environ: dict[str, str]) -> ServerLimits:
        values = {}
        for name, variable in cls.ENVIRONMENT.items():
            if variable in environ:
                try:
                    values[name] = int(environ[variable])
                except ValueError as error:
                    message = f"{variable} must be a whole number, got {environ[variable]!r}"
                    raise SpecDecError(message) from error
        return cls(**values)

    def __post_init__(self) -> None:
        if self.max_prompt_chars < 1 or self.prefill_chunk < 1 or self.max_live_runs < 1:
            raise SpecDecError("SPECDEC_MAX_PROMPT_CHARS, SPECDEC_PREFILL_CHUNK and SPECDEC_MAX_LIVE_RUNS "
                               "must be at least 1")
