"""The data campaign: many of the target's own answers, to prompts of many kinds, with its features.

It works in shards of `batch` answers and resumes at the first missing one:
- `answers-NNNN.safetensors` (kept with the project, `assets/campaign/`): the token ids the target
  wrote (prompt and answer), each answer's kind and where it starts. A few hundred kilobytes a shard,
  so the campaign survives a fresh checkout and goes on where it stopped.
- `features-NNNN.safetensors` (the cache): the target's last hidden state (after its final norm) at
  every position. They are captured while the target writes (a hook on that norm: no second pass);
  a shard whose features are missing (another machine) gets them by one teacher-forced pass.

The target samples at temperature 1 from its full distribution: the answers are its own text, the
text a drafter will meet. Answers are sampled together in one left-padded batch per shard. A greedy
campaign (`greedy=True`) answers the same prompts with the target's argmax, the text T = 0 drafting
meets, in folders of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec.errors import SpecDecError
from specdec.models.loading import LoadedModel, cache_root
from specdec.paths import CAMPAIGN_ANSWERS, GREEDY_CAMPAIGN_ANSWERS
from specdec.training.campaign_prompts import KINDS, campaign_prompt
from specdec.training.data import Example, top_labels, write_shards
from specdec.training.features import target_features

ANSWERS_PATTERN, FEATURES_PATTERN = "answers-{:04d}.safetensors", "features-{:04d}.safetensors"
SUMMARY_FILE = "campaign.json"
SHORT_PROMPT = 96  # tokens, in the chat template: longer prompts are answered in a batch of their own


def campaign_answers_folder(greedy: bool = False) -> Path:
    """The answers' token ids: small, so they are kept with the project."""
    return GREEDY_CAMPAIGN_ANSWERS if greedy else CAMPAIGN_ANSWERS


def campaign_features_folder(greedy: bool = False) -> Path:
    """The features: large (1.1 kB per position), so they live in the cache and are remade if absent."""
    return cache_root() / ("campaign-greedy-features" if greedy else "campaign-features")


def campaign_command(greedy: bool = False) -> str:
    """The command that writes (and goes on with) that campaign, and fills in its missing features."""
    return "python -m specdec campaign" + " --greedy" * greedy


@dataclass
class Answer:
    """One prompt and the target's answer, with the target's features at every position (if loaded)."""

    token_ids: torch.Tensor  # (length,) prompt (in the chat template) + answer
    answer_start: int
    kind: str
    features: torch.Tensor | None = None  # (length, hidden), bf16


@contextmanager
def captured_features(model) -> Iterator[list[torch.Tensor]]:
    """Every output of the model's final norm while the block runs: (batch, new positions, hidden)."""
    outputs: list[torch.Tensor] = []
    norm = model.get_decoder().norm
    handle = norm.register_forward_hook(lambda _module, _inputs, output: outputs.append(
        output.detach().to(torch.bfloat16).cpu()))
    try:
        yield outputs
    finally:
        handle.remove()


@torch.inference_mode()
def answer_batch(target: LoadedModel, prompts: list[tuple[str, str]], max_new_tokens: int, seed: int,
                 greedy: bool = False) -> list[Answer]:
    """The target answers (kind, prompt) pairs in one batch at temperature 1 (or greedily); each answer
    keeps its features. The last token of a full-length answer was never read by the target (no
    features), so it is dropped."""
    tokenizer, model = target.tokenizer, target.model
    encoded = [target.chat_ids(prompt) for _, prompt in prompts]
    width = max(map(len, encoded))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # Left padding, so that every answer starts at the same column.
    input_ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], device=target.device)
    attention_mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded],
                                  device=target.device)
    torch.manual_seed(seed)  # transformers samples from the global generator
    sampling = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
    sampling = {"do_sample": False} if greedy else sampling
    with captured_features(model) as outputs:
        sequences = model.generate(input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
                                   pad_token_id=pad, **sampling)
    features = torch.cat(outputs, dim=1)  # (batch, every column the target read, hidden)
    eos = {tokenizer.eos_token_id}
    read = features.shape[1] - width  # answer tokens the target read back
    answers = []
    for row, ((kind, _), prompt_ids) in enumerate(zip(prompts, encoded, strict=True)):
        answer = sequences[row, width:].tolist()
        length = min(next((i + 1 for i, t in enumerate(answer) if t in eos), len(answer)), read)
        start = width - len(prompt_ids)
        answers.append(Answer(torch.tensor(prompt_ids + answer[:length]), len(prompt_ids), kind,
                              features[row, start : width + length].clone()))
    return answers


def answer_shard(target: LoadedModel, prompts: list[tuple[str, str]], max_new_tokens: int, seed: int,
                 short_prompt: int = SHORT_PROMPT, greedy: bool = False) -> list[Answer]:
    """answer_batch over a shard's prompts in two groups, prompts up to `short_prompt` tokens and longer
    ones, so that a few long passages (copy and edit tasks) do not pad every row of the batch: a step's
    cost grows with batch x cache length (docs/LOG.md, "Figures that lived in code comments"). Answers
    come back in the prompts' order."""
    lengths = [len(target.chat_ids(prompt)) for _, prompt in prompts]
    short = [i for i, n in enumerate(lengths) if n <= short_prompt]
    long = [i for i, n in enumerate(lengths) if n > short_prompt]
    answers: dict[int, Answer] = {}
    for number, group in enumerate(g for g in (short, long) if g):
        made = answer_batch(target, [prompts[i] for i in group], max_new_tokens, seed * 2 + number, greedy)
        answers |= dict(zip(group, made, strict=True))
    return [answers[i] for i in range(len(prompts))]


def save_answers(answers: list[Answer], path: Path, metadata: dict[str, str]) -> None:
    """Token ids of a shard, concatenated, with each answer's length, start and kind; written whole or not
    at all."""
    token_ids = torch.cat([a.token_ids for a in answers])
    # Two bytes a token where the vocabulary allows (the bundled target's has 49,152 tokens).
    narrow = torch.uint16 if int(token_ids.max()) < 2**16 else torch.int32
    tensors = {
        "token_ids": token_ids.to(narrow),
        "lengths": torch.tensor([len(a.token_ids) for a in answers], dtype=torch.int32),
        "answer_starts": torch.tensor([a.answer_start for a in answers], dtype=torch.int32),
        "kinds": torch.tensor([KINDS.index(a.kind) for a in answers], dtype=torch.int8),
    }
    _save_whole(tensors, path, metadata)


def save_features(answers: list[Answer], path: Path) -> None:
    _save_whole({"features": torch.cat([a.features for a in answers])}, path, {})


def _save_whole(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    partial = path.with_suffix(".partial")
    save_file(tensors, partial, metadata=metadata)
    partial.rename(path)  # a shard is whole or absent


def load_answers(path: Path, features_path: Path | None = None) -> list[Answer]:
    stored = load_file(path)
    features = load_file(features_path)["features"] if features_path else None
    answers, offset = [], 0
    for length, start, kind in zip(stored["lengths"].tolist(), stored["answer_starts"].tolist(),
                                   stored["kinds"].tolist(), strict=True):
        answers.append(Answer(stored["token_ids"][offset : offset + length].long(), start, KINDS[kind],
                              None if features is None else features[offset : offset + length]))
        offset += length
    return answers


@torch.inference_mode()
def teacher_forced_features(target: LoadedModel, answers: list[Answer], batch_size: int = 16) -> None:
    """Fill in each answer's features by reading it whole (for shards written on another machine)."""
    bf16 = target.model.dtype == torch.bfloat16
    for first in range(0, len(answers), batch_size):
        group = answers[first : first + batch_size]
        for answer, features in zip(group, target_features(target.model, [a.token_ids for a in group], bf16),
                                    strict=True):
            answer.features = features


def shard_paths(answers_folder: Path, features_folder: Path, index: int) -> tuple[Path, Path]:
    return answers_folder / ANSWERS_PATTERN.format(index), features_folder / FEATURES_PATTERN.format(index)


def existing_shards(answers_folder: Path) -> int:
    """How many shards exist from the first on, without a gap."""
    count = 0
    while (answers_folder / ANSWERS_PATTERN.format(count)).exists():
        count += 1
    return count


def run_campaign(target: LoadedModel, answers_folder: Path, features_folder: Path, total_answers: int,
                 batch: int, max_new_tokens: int, seed: int = 0, minutes: float | None = None,
                 progress: Callable[[dict], None] | None = None, greedy: bool = False) -> dict:
    """Write shards until `total_answers` answers exist (or `minutes` have passed: the shard under way
    finishes); fill in the missing features of those answers first. Returns the campaign's summary (also
    written beside the answers). `greedy`: the target's greedy answers (the text T = 0 drafting meets), not
    samples."""
    answers_folder.mkdir(parents=True, exist_ok=True)
    features_folder.mkdir(parents=True, exist_ok=True)
    shards = -(-total_answers // batch)
    summary = read_summary(answers_folder) or {"seed": seed, "batch": batch, "max_new_tokens": max_new_tokens,
                                               "greedy": greedy, "generation_seconds": 0.0,
                                               "generated_positions": 0}
    settings = (summary["seed"], summary["batch"], summary["max_new_tokens"], summary.get("greedy", False))
    if settings != (seed, batch, max_new_tokens, greedy):
        raise SpecDecError(f"{answers_folder} holds a campaign with seed {summary['seed']}, batch "
                           f"{summary['batch']}, {summary['max_new_tokens']} new tokens and "
                           f"{'greedy' if settings[3] else 'sampled'} answers: go on with those, or use "
                           "another folder")
    done = existing_shards(answers_folder)
    # Features made elsewhere are not here: read those answers once (only the first `total_answers`'
    # shards: a smaller goal than the campaign holds fills in the features a shorter run needs).
    for index in range(min(done, shards)):
        answers_path, features_path = shard_paths(answers_folder, features_folder, index)
        if not features_path.exists():
            answers = load_answers(answers_path)
            teacher_forced_features(target, answers)
            save_features(answers, features_path)
    summary |= shard_counts(answers_folder)  # read once; each new shard adds its own below
    started = time.perf_counter()
    for index in range(done, shards):
        if minutes is not None and time.perf_counter() - started > minutes * 60:
            break
        prompts = [campaign_prompt(i, seed) for i in range(index * batch, (index + 1) * batch)]
        shard_start = time.perf_counter()
        answers = answer_shard(target, prompts, max_new_tokens, seed=seed * 1_000_003 + index, greedy=greedy)
        seconds = time.perf_counter() - shard_start
        answers_path, features_path = shard_paths(answers_folder, features_folder, index)
        save_features(answers, features_path)  # features first: answers without them are refilled
        save_answers(answers, answers_path, {"seconds": f"{seconds:.2f}", "dtype": str(target.model.dtype)})
        summary["generation_seconds"] += seconds
        positions = sum(len(a.token_ids) - a.answer_start for a in answers)
        summary["generated_positions"] += positions
        summary["shards"] += 1
        summary["answers"] += len(answers)
        summary["answer_positions"] += positions
        for answer in answers:
            summary["kinds"][answer.kind] += 1
        write_summary(answers_folder, summary)
        if progress:
            rate = summary["generated_positions"] / summary["generation_seconds"]
            progress({"shard": index + 1, "shards": shards, "seconds": seconds,
                      "answer_tokens_per_second": rate})
    return summary


def shard_counts(answers_folder: Path) -> dict:
    """Answers, answer positions and answers per kind over every shard there."""
    counts = {"shards": 0, "answers": 0, "answer_positions": 0, "kinds": dict.fromkeys(KINDS, 0)}
    for index in range(existing_shards(answers_folder)):
        stored = load_file(answers_folder / ANSWERS_PATTERN.format(index))
        counts["shards"] += 1
        counts["answers"] += len(stored["lengths"])
        counts["answer_positions"] += int((stored["lengths"] - stored["answer_starts"]).sum())
        for kind in stored["kinds"].tolist():
            counts["kinds"][KINDS[kind]] += 1
    return counts


def answer_token_counts(answers_folder: Path, vocab_size: int) -> dict[str, torch.Tensor]:
    """Per kind, how often each token occurs in the campaign's answers there (the prompts left out)."""
    counts = {kind: torch.zeros(vocab_size, dtype=torch.float64) for kind in KINDS}
    for index in range(existing_shards(answers_folder)):
        for answer in load_answers(answers_folder / ANSWERS_PATTERN.format(index)):
            answer_ids = answer.token_ids[answer.answer_start :]
            counts[answer.kind] += torch.bincount(answer_ids, minlength=vocab_size)
    return counts


def frequent_answer_tokens(count: int, vocab_size: int,
                           answers_folders: tuple[Path, ...] = (GREEDY_CAMPAIGN_ANSWERS, CAMPAIGN_ANSWERS)
                           ) -> list[int]:
    """The `count` tokens a reduced draft head scores (FR-Spec), read off the campaigns' answers.

    Greedy answers are the target's argmax at every step, the text T = 0 drafting meets; sampled ones
    are draws from its whole distribution, so their counts estimate its probability mass, what T > 0
    drafting meets. Each folder's counts are normalised, so the campaigns weigh the same whatever their
    size; ties go to the lower id, so the list is the same on every machine.
    """
    totals = (sum(answer_token_counts(folder, vocab_size).values()) for folder in answers_folders)
    share = sum(counts / counts.sum() for counts in totals)
    return sorted(torch.argsort(-share, stable=True)[:count].tolist())


def read_summary(answers_folder: Path) -> dict | None:
    path = answers_folder / SUMMARY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def write_summary(answers_folder: Path, summary: dict) -> None:
    (answers_folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")


def load_campaign(answers_folder: Path, features_folder: Path, answers: int = 0) -> list[Answer]:
    """The first `answers` answers (0: all) with their features, in campaign order."""
    loaded: list[Answer] = []
    for index in range(existing_shards(answers_folder)):
        if answers and len(loaded) >= answers:
            break
        loaded += load_answers(*shard_paths(answers_folder, features_folder, index))
    return loaded[:answers] if answers else loaded


@torch.inference_mode()
def campaign_examples(answers: list[Answer], output_head: torch.Tensor, top_k: int) -> list[Example]:
    """Answers with features -> the draft's training examples: the target's top-k tokens and probabilities
    at each answer position, read off the stored features through its output head (the features are
    after the final norm, so this is the target's own distribution: no second pass)."""
    examples = []
    for answer in answers:
        # The feature at position i predicts token i + 1: answer_start - 1 ... length - 2.
        features = answer.features[answer.answer_start - 1 : len(answer.token_ids) - 1]
        top_ids, top_probs = top_labels(features, output_head, top_k)
        examples.append(Example(answer.token_ids, answer.answer_start, top_ids, top_probs, answer.kind))
    return examples


def labelled_campaign_shards(target: LoadedModel, answers_folder: Path, features_folder: Path, folder: Path,
                             top_k: int, progress: Callable[[int, int], None] | None = None,
                             answers: int = 0) -> list[Path]:
    """The campaign's shards as the draft's training shards (one each, resumable): see campaign_examples.
    `answers`: only the shards that hold the first that many (0: all)."""
    folder.mkdir(parents=True, exist_ok=True)
    output_head = target.model.get_output_embeddings().weight.detach()[: target.vocab_size]

    def label(index: int) -> list[Example]:
        answers_path, features_path = shard_paths(answers_folder, features_folder, index)
        if not features_path.exists():  # a fresh checkout has the answers, not their features
            command = campaign_command((read_summary(answers_folder) or {}).get("greedy", False))
            raise SpecDecError(f"the campaign's features for shard {index} are not in {features_folder}: "
                               f"`{command}` fills them in (one pass over the answers)")
        return campaign_examples(load_answers(answers_path, features_path), output_head, top_k)

    shards = existing_shards(answers_folder)
    if answers and shards:
        shards = min(shards, -(-answers // read_summary(answers_folder)["batch"]))
    paths = [folder / f"campaign-{index:04d}.pt" for index in range(shards)]
    return write_shards(paths, label, progress)
