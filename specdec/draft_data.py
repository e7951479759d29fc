"""Training data for the draft: the target's own answers (on-policy distillation), made offline.

The target answers varied instruction prompts; at every answer position we keep the target's top
tokens and their probabilities. The draft then learns to match that distribution (DistillSpec): the
closer q is to p on the text the target actually writes, the more drafts are accepted.
Evaluation prompts (assets/prompts/*.json) are never used here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from specdec.models import LoadedModel

CODE_TASKS = [
    "reverses a linked list", "merges two sorted lists", "counts the vowels in a string",
    "checks whether a number is prime", "computes the factorial of n", "flattens a nested list",
    "finds the largest element in a list", "removes whitespace from a string", "sorts a list of "
    "dictionaries by a key", "converts Celsius to Fahrenheit", "computes the greatest common divisor",
    "returns the unique words in a sentence", "implements binary search", "implements bubble sort",
    "parses a date string", "validates an email address", "reads a text file and counts its lines",
    "writes a list of rows to a CSV file", "computes the mean and median of a list",
    "capitalises every word in a string", "generates a random password", "checks balanced "
    "parentheses", "transposes a matrix", "multiplies two matrices", "computes a running sum",
    "groups a list of words by their first letter", "converts a number to binary", "finds "
    "duplicates in a list", "computes the power set of a set", "rotates a list by k positions",
    "counts word frequencies in a text", "implements a queue with two stacks", "computes the "
    "distance between two points", "checks whether two strings are anagrams", "returns the n "
    "smallest elements", "chunks a list into pieces of size n", "implements a simple LRU cache",
    "retries a function call three times", "measures how long a function takes", "formats a number "
    "with thousands separators", "computes compound interest", "finds the longest common prefix",
    "converts a dictionary to JSON and back", "filters even numbers from a list", "zips two lists "
    "into a dictionary", "finds the second largest number", "computes the area of a circle",
    "checks whether a year is a leap year", "deep-copies a nested dictionary", "merges two dictionaries",
]
CODE_TEMPLATES = [
    "Write a Python function that {task}.",
    "Write a Python function that {task}. Add a docstring and type hints.",
    "Show me Python code that {task}, with an example call.",
    "Write a JavaScript function that {task}.",
    "Implement a small Python class that {task}.",
]
PROSE_TOPICS = [
    "autumn in a small village", "a robot learning to cook", "the first day at a new school",
    "why people keep diaries", "a journey by night train", "the smell of rain", "an old lighthouse",
    "learning to play the piano", "a market on a Sunday morning", "the life of a honeybee",
    "friendship between a fox and a crow", "a city without cars", "the benefits of walking",
    "a letter to your future self", "a forgotten library", "how bread is made", "the moon landing",
    "a summer by the lake", "a shy dragon", "the importance of sleep", "a storm at sea",
    "a grandmother's recipe book", "why music moves us", "a day without the internet",
]
PROSE_TEMPLATES = [
    "Write a short story about {topic}.",
    "Write a short poem about {topic}.",
    "Describe {topic} in a few sentences.",
    "Write a paragraph explaining {topic} to a child.",
]


def training_prompts(seed: int = 0) -> list[str]:
    """Every (template, subject) pair, shuffled: about 60 % code, 40 % prose."""
    code = [t.format(task=task) for t, task in itertools.product(CODE_TEMPLATES, CODE_TASKS)]
    prose = [t.format(topic=topic) for t, topic in itertools.product(PROSE_TEMPLATES, PROSE_TOPICS)]
    prompts = code + prose
    random.Random(seed).shuffle(prompts)
    return prompts


@dataclass
class Example:
    """One answer: the full sequence, and the target's top tokens at each answer position."""

    token_ids: torch.Tensor  # (length,) prompt + answer
    answer_start: int  # first answer position: labels cover positions answer_start - 1 ... length - 2
    top_ids: torch.Tensor  # (answer_length, top_k) the target's most likely next tokens
    top_probs: torch.Tensor  # (answer_length, top_k) their probabilities (not renormalised)


@torch.inference_mode()
def sample_answers(
    target: LoadedModel,
    prompts: list[str],
    max_new_tokens: int,
    top_k: int,
    seed: int,
) -> list[Example]:
    """The target answers a batch of prompts at temperature 1; keep its top-k at each position."""
    tokenizer, model = target.tokenizer, target.model
    encoded = [target.chat_ids(p) for p in prompts]
    width = max(map(len, encoded))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # Left padding, so every answer starts at the same column.
    input_ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
    attention_mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    torch.manual_seed(seed)  # transformers samples from the global generator
    output = model.generate(
        input_ids, attention_mask=attention_mask, do_sample=True, temperature=1.0, top_k=0,
        top_p=1.0, max_new_tokens=max_new_tokens, output_logits=True,
        return_dict_in_generate=True, pad_token_id=pad,
    )
    logits = torch.stack(output.logits, dim=1)[..., : target.vocab_size].float()  # (batch, new, vocab)
    top_probs, top_ids = torch.softmax(logits, -1).topk(top_k, dim=-1)
    answers = output.sequences[:, width:]
    eos = set(tokenizer.convert_tokens_to_ids([tokenizer.eos_token]))
    examples = []
    for row, prompt_ids in enumerate(encoded):
        answer = answers[row].tolist()
        length = next((i + 1 for i, t in enumerate(answer) if t in eos), len(answer))
        examples.append(Example(
            token_ids=torch.tensor(prompt_ids + answer[:length]),
            answer_start=len(prompt_ids),
            top_ids=top_ids[row, :length].clone(),
            top_probs=top_probs[row, :length].to(torch.float16).clone(),
        ))
    return examples


def make_shards(
    target: LoadedModel,
    folder: Path,
    samples_per_prompt: int,
    batch_size: int,
    max_new_tokens: int,
    top_k: int,
    max_shards: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Write the training answers as shards of `batch_size` answers; existing shards are kept (resume)."""
    folder.mkdir(parents=True, exist_ok=True)
    prompts = training_prompts() * samples_per_prompt
    batches = [prompts[i : i + batch_size] for i in range(0, len(prompts), batch_size)]
    batches = batches[:max_shards] if max_shards else batches
    paths = []
    for index, batch in enumerate(batches):
        path = folder / f"shard-{index:04d}.pt"
        if not path.exists():
            examples = sample_answers(target, batch, max_new_tokens, top_k, seed=index)
            torch.save(examples, path.with_suffix(".tmp"))
            path.with_suffix(".tmp").rename(path)  # a shard is either whole or absent
        paths.append(path)
        if progress:
            progress(index + 1, len(batches))
    return paths


def frequent_tokens(examples: list[Example], count: int, vocab_size: int) -> list[int]:
    """The `count` tokens the target gives the most probability mass to over all answer positions.

    These are the tokens a reduced draft head scores (FR-Spec); ranking by the target's mass rather
    than by sampled text also covers the likely tokens it happened not to sample.
    """
    mass = torch.zeros(vocab_size)
    for e in examples:
        mass.index_add_(0, e.top_ids.flatten(), e.top_probs.float().flatten())
    return sorted(mass.topk(count).indices.tolist())
