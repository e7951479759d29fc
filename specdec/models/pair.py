"""A target with its drafter: loaded once, checked once, then shared read-only by every run."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from specdec.core.cached_model import CachedModel, linear_kind
from specdec.core.drafters import Drafter, FeatureDrafter, LookupThenModelDrafter, ModelDrafter, NgramDrafter
from specdec.core.early_exit import EarlyExitDrafter
from specdec.errors import SpecDecError
from specdec.kernels.decoder_step import (
    draft_step_by_hand,
    embedded_step,
    head_step_by_hand,
    library_steps_asked,
    shallow_step,
    steps_by_hand,
)
from specdec.model_names import LOOKUP_FIRST, NGRAM, check_pair_names
from specdec.models.exit_files import LoadedExit, is_exit, load_exit
from specdec.models.feature_head_files import LoadedHead, is_head, load_head
from specdec.models.loading import LoadedModel, check_tokenizers_match, load_model, shipped_draft_exists
from specdec.paths import BUNDLED_DRAFT, BUNDLED_TARGET


def default_drafter(target_name: str) -> str:
    """The drafter used when none is asked for: for the bundled target, n-gram lookup first, then the
    draft trained here (if shipped), as chosen by bench reports from both kinds of CPU (docs/LOG.md,
    "The default drafter, measured on two kinds of CPU"; docs/benchmarks.md): never slower than the target
    alone on any held-out set, and the fastest on code of those with a batched form, which a feature head
    lacks."""
    if target_name == BUNDLED_TARGET and shipped_draft_exists():
        return LOOKUP_FIRST + BUNDLED_DRAFT
    return NGRAM


@dataclass(frozen=True)
class ModelPair:
    target: LoadedModel
    draft: LoadedModel | None  # the draft model that drafts; None for the other drafters
    lookup_first: bool = False  # try an n-gram lookup before asking the draft model or the head
    head: LoadedHead | None = None  # the feature head that drafts, reading the target (core.feature_head)
    loaded: tuple = ()  # every draft model and head loaded for this target so far: switching reloads none
    exit: LoadedExit | None = None  # the target's own first layers that draft (core.early_exit)

    @classmethod
    def load(cls, target_name: str = BUNDLED_TARGET, drafter: str | None = None) -> ModelPair:
        """`drafter` is "ngram", a draft model's bundled name, Hugging Face id or folder, or a feature
        head's (bundled name or folder); "ngram+" before a model or head: lookup first."""
        check_pair_names(target_name, drafter)  # a mistyped name fails before any weight loads
        target = load_model(target_name)
        _ = target.pass_costs  # timed now, with the load, not when the first run starts
        return cls(target, None).with_drafter(drafter or default_drafter(target_name))

    def with_drafter(self, drafter: str) -> ModelPair:
        """The same loaded target with another drafter ("ngram", a draft model or a feature head, with
        "ngram+" before either): no second target, and no second load of a drafter it already had."""
        loaded = tuple({m.name: m for m in (self.draft, self.head, self.exit, *self.loaded)
                        if m is not None}.values())
        if drafter == NGRAM:
            return ModelPair(self.target, None, loaded=loaded)
        lookup_first, model_name = drafter.startswith(LOOKUP_FIRST), drafter.removeprefix(LOOKUP_FIRST)
        model = next((m for m in loaded if m.name == model_name), None)
        if model is None:
            if is_exit(model_name):
                model = load_exit(model_name, self.target)
            elif is_head(model_name):
                model = load_head(model_name, self.target)
            else:
                model = load_model(model_name, draft=True)
                check_tokenizers_match(self.target, model)
            loaded += (model,)
        if isinstance(model, LoadedHead):
            return ModelPair(self.target, None, lookup_first, model, loaded)
        if isinstance(model, LoadedExit):
            return ModelPair(self.target, None, lookup_first, None, loaded, model)
        return ModelPair(self.target, model, lookup_first, None, loaded)

    @property
    def drafter_name(self) -> str:
        model = self.head or self.draft or self.exit
        if model is None:
            return NGRAM
        return LOOKUP_FIRST + model.name if self.lookup_first else model.name

    def new_target(self) -> CachedModel:
        """The target with a fresh KV cache for one run, keeping its features if the head reads them, and
        its layer-L states if an exit adapter does."""
        adapter_reads = self.exit.layers if self.exit is not None and self.exit.adapter is not None else 0
        return CachedModel(self.target.model, self.target.vocab_size, keep_features=self.head is not None,
                           pass_costs=self.target.pass_costs, keep_layer=adapter_reads)

    def new_drafter(self, target: CachedModel | None = None) -> Drafter:
        """A fresh drafter for one run: its KV cache is that run's alone. A feature head reads the run's
        `target` (from new_target). A draft or head gets its one-token step by hand where the kernels
        have one (specdec/kernels/decoder_step.py). An early exit runs on the run's `target` cache."""
        lookup = NgramDrafter(self.target.vocab_size)
        if self.exit is not None:
            if target is None:
                raise ValueError("an early exit shares the run's target cache: pass new_target()'s")
            model = self._exit_drafter(target)
        elif self.head is not None:
            if target is None or not target.keep_features:
                raise ValueError("a feature head needs the run's target, made by new_target()")
            model = FeatureDrafter(self.head.head, target, self.head.reduced, self.head.name,
                                   step=head_step_by_hand(self.head.head))
        elif self.draft is not None:
            model = ModelDrafter(self.draft.model, self.target.vocab_size, self.draft.name,
                                 self.draft.reduced_head, step=draft_step_by_hand(self.draft.model))
        else:
            return lookup
        return LookupThenModelDrafter(lookup, model) if self.lookup_first else model

    def _exit_drafter(self, target: CachedModel) -> EarlyExitDrafter:
        """The early exit on the run's target cache, with its steps by hand where the kernels have them;
        it drafts through its int8 copy of the shallow layers where the loader made one."""
        loaded, adapter = self.exit, self.exit.adapter
        decoder = self.target.model.get_decoder()
        rounded = loaded.drafting_layers
        shallow = None
        if rounded is not None or steps_by_hand(self.target.model):
            drafting = rounded if rounded is not None else decoder.layers[: loaded.layers]
            shallow = partial(shallow_step, decoder, drafting)
        by_hand = adapter is not None and not library_steps_asked()
        return EarlyExitDrafter(target, loaded.layers, loaded.reduced, adapter, loaded.name,
                                step=partial(embedded_step, adapter.decoder) if by_hand else None,
                                shallow=shallow, linear=linear_kind(rounded) if rounded is not None else None)

    @property
    def stop_token_ids(self) -> set[int]:
        eos = self.target.model.generation_config.eos_token_id
        if eos is None:
            eos = self.target.tokenizer.eos_token_id
        return set(eos) if isinstance(eos, list) else {eos} if eos is not None else set()

    def encode_prompt(self, prompt: str, chat: bool, max_new_tokens: int = 0) -> list[int]:
        """Text -> token ids, with the target's chat template if asked; refuses empty and too long."""
        if not prompt.strip():
            raise SpecDecError("the prompt is empty: type some text to continue")
        tokenizer = self.target.tokenizer
        if chat:
            if not getattr(tokenizer, "chat_template", None):
                raise SpecDecError(f"model '{self.target.name}' has no chat template: turn chat off")
            ids = self.target.chat_ids(prompt)
        else:
            ids = tokenizer(prompt)["input_ids"]
        if not ids:
            raise SpecDecError("the prompt encodes to no tokens: type some text to continue")
        limit = self.target.context_length
        if len(ids) + max_new_tokens > limit:
            raise SpecDecError(
                f"the prompt is {len(ids)} tokens; with {max_new_tokens} new tokens that exceeds "
                f"the target's context of {limit} tokens: shorten it"
            )
        return ids

    def decode(self, token_ids: list[int]) -> str:
        return self.target.tokenizer.decode(token_ids, skip_special_tokens=True)

    def token_text(self, token_id: int) -> str:
        """One token as text, special tokens included (for showing tokens one by one)."""
        return self.target.tokenizer.decode([token_id])
