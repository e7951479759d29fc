"""Training data for the draft: the target's own answers (on-policy distillation), made offline.

The target answers varied instruction prompts; at every answer position we keep the target's top
tokens and their probabilities. The draft then learns to match that distribution (DistillSpec): the
closer q is to p on the text the target actually writes, the more drafts are accepted.
A second, cheaper source is code the target reads rather than writes: functions and classes from
the Python standard library, labelled by one forward pass (teacher forcing, ~10x faster than sampling
on a CPU). Evaluation prompts (assets/prompts/*.json) are never used here.
"""

from __future__ import annotations

import itertools
import random
import re
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.utils.rnn import pad_sequence

from specdec.models.loading import LoadedModel

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


# Added in the second training run: more subjects and forms, because a draft trained on the first
# 346 prompts alone memorised their answers (0.73 overlap on them, 0.40 on held-out prompts).
MORE_CODE_TASKS = [
    "counts the characters in a file", "finds all prime numbers below n with a sieve",
    "checks whether a list is sorted", "returns the most common element of a list",
    "splits a sentence into words and sorts them", "converts a Roman numeral to an integer",
    "converts an integer to a Roman numeral", "computes the nth triangular number",
    "checks whether a string contains only digits", "swaps the keys and values of a dictionary",
    "finds the index of the first vowel in a string", "computes the dot product of two vectors",
    "normalises a list of numbers to the range 0 to 1", "removes the None values from a list",
    "reverses the words in a sentence", "computes the sum of the digits of a number",
    "checks whether a number is a perfect square", "finds the longest word in a sentence",
    "counts how many times a substring occurs", "returns the intersection of two lists",
    "implements a stack-based calculator for postfix expressions", "pads a string to a fixed width",
    "truncates a string with an ellipsis", "converts snake_case to camelCase",
    "converts camelCase to snake_case", "computes the Levenshtein distance of two strings",
    "finds the missing number in a list from 1 to n", "returns every pair of numbers that sum to a target",
    "implements insertion sort", "implements merge sort", "implements quicksort",
    "computes a moving average over a window", "builds a histogram of word lengths",
    "parses key=value pairs from a string", "loads a JSON file and prints its keys",
    "lists every file in a folder with a given extension", "builds a URL with query parameters",
    "validates a phone number with a regular expression",
    "extracts every number from a string", "computes the median of a stream of numbers",
    "implements a binary tree with insert and search", "performs a breadth-first search on a graph",
    "performs a depth-first search on a graph", "detects a cycle in a linked list",
    "computes the height of a binary tree", "merges overlapping intervals",
    "computes the Fibonacci numbers up to n with a generator", "memoises a slow function",
    "implements a countdown timer", "shuffles a deck of cards", "simulates rolling two dice",
    "computes the area and perimeter of a rectangle", "represents a bank account with deposit "
    "and withdraw", "tracks inventory items and their quantities", "converts a list of tuples "
    "into a dictionary", "computes the cumulative product of a list", "checks whether a number "
    "is an Armstrong number", "finds the common elements of three lists", "encodes a string with "
    "a Caesar cipher", "decodes a Caesar cipher", "counts the uppercase letters in a string",
    "removes punctuation from a string", "calculates a person's age from a birth date",
    "returns the day of the week for a date", "computes the number of days between two dates",
    "flattens a dictionary of dictionaries", "sorts a list of tuples by their second element",
    "finds the k most frequent words", "checks whether a sentence is a pangram",
    "computes the product of all numbers in a list", "generates the multiplication table of n",
    "prints a right-angled triangle of stars", "converts hours and minutes to seconds",
    "validates that a password is strong", "computes the standard deviation of a list",
    "logs messages to a file with timestamps", "parses command-line arguments with argparse",
    "runs two tasks concurrently with threads", "reads a config file with configparser",
]
MORE_CODE_TEMPLATES = [
    "Write a Python function that {task}. Explain how it works.",
    "How do I write a function in Python that {task}?",
    "Write a short Python program that {task} and prints the result.",
    "Write a Python function that {task}, and a unit test for it.",
]
SQL_TASKS = [
    "counts the orders per customer", "lists the products that were never ordered",
    "finds the average salary per department", "selects the employees hired in the last year",
    "returns the second highest salary", "joins the orders and customers tables",
    "deletes the duplicate rows from a table", "finds the customers with more than five orders",
    "computes the monthly revenue", "lists the departments with no employees",
    "updates the price of every product in a category", "creates a table for blog posts",
    "ranks the students by their grade", "finds the most popular product in each category",
    "selects the rows where the email is missing", "groups the sales by region and year",
]
SQL_TEMPLATES = ["Write a SQL query that {task}.", "Write an SQL statement that {task}, and explain it."]
MORE_PROSE_TOPICS = [
    "a lost umbrella", "the first snow of the year", "a cat who guards a bakery",
    "the history of the bicycle", "a conversation between two trees", "a rainy afternoon in a cafe",
    "how volcanoes form", "a child's first kite", "the ocean at dawn", "a forgotten toy",
    "why the sky is blue", "a train station at midnight", "a garden in spring", "the life of a river",
    "a clockmaker's last clock", "an astronaut's letter home", "why we dream", "a village festival",
    "the first computer", "a dog waiting at the door",
]
MORE_PROSE_TEMPLATES = [
    "Tell me about {topic}.",
    "Write a haiku about {topic}.",
    "Write a short blog post about {topic}.",
]


def training_prompts(seed: int = 0) -> list[str]:
    """The first set (every template x subject, shuffled: about 60 % code), then the second set.

    The first set's order is kept so that data made for it stays valid (shards resume by index).
    """
    def combine(templates, subjects, key):
        return [t.format(**{key: subject}) for t, subject in itertools.product(templates, subjects)]

    first = combine(CODE_TEMPLATES, CODE_TASKS, "task") + combine(PROSE_TEMPLATES, PROSE_TOPICS, "topic")
    random.Random(seed).shuffle(first)
    second = (
        combine(MORE_CODE_TEMPLATES, CODE_TASKS + MORE_CODE_TASKS, "task")
        + combine(CODE_TEMPLATES, MORE_CODE_TASKS, "task")
        + combine(SQL_TEMPLATES, SQL_TASKS, "task")
        + combine(PROSE_TEMPLATES, MORE_PROSE_TOPICS, "topic")
        + combine(MORE_PROSE_TEMPLATES, PROSE_TOPICS + MORE_PROSE_TOPICS, "topic")
    )
    random.Random(seed).shuffle(second)
    return first + second


@dataclass
class Example:
    """One answer: the full sequence, and the target's top tokens at each answer position."""

    token_ids: torch.Tensor  # (length,) prompt + answer
    answer_start: int  # first answer position: labels cover positions answer_start - 1 ... length - 2
    top_ids: torch.Tensor  # (answer_length, top_k) the target's most likely next tokens
    top_probs: torch.Tensor  # (answer_length, top_k) their probabilities (not renormalised)
    kind: str = ""  # the campaign's kind of prompt (code, prose, ...), where known


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
    paths = [folder / f"shard-{index:04d}.pt" for index in range(len(batches))]
    return write_shards(paths, lambda index: sample_answers(target, batches[index], max_new_tokens, top_k,
                                                            seed=index), progress)


def write_shards(paths: list[Path], make: Callable[[int], list], progress: Callable[[int, int], None] | None
                 ) -> list[Path]:
    """Save `make(index)` to each path that does not exist yet (so a run resumes where it stopped)."""
    for index, path in enumerate(paths):
        if not path.exists():
            torch.save(make(index), path.with_suffix(".tmp"))
            path.with_suffix(".tmp").rename(path)  # a shard is either whole or absent
        if progress:
            progress(index + 1, len(paths))
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


STDLIB_SKIP = {"site-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo", "ensurepip"}
# A top-level function or class: its header line, then every indented or blank line after it.
TOP_LEVEL_BLOCK = re.compile(r"^(?:def|class) [^\n]*\n(?:[ \t]+[^\n]*\n|\n)*", re.MULTILINE)
STDLIB_PROMPT = "Show me a function or class from Python's `{module}` module."


def stdlib_code_blocks(
    count: int, seed: int = 0, min_chars: int = 200, max_chars: int = 1500
) -> list[tuple[str, str]]:
    """`count` top-level functions and classes of this Python's standard library, as (module, source)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    blocks = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if STDLIB_SKIP & set(relative.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        blocks += [(module, m.group().rstrip()) for m in TOP_LEVEL_BLOCK.finditer(text)
                   if min_chars <= len(m.group()) <= max_chars]
    random.Random(seed).shuffle(blocks)  # shuffled whole, so a smaller count is a prefix of a larger
    return blocks[:count]


def right_padded(sequences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences as one batch padded with 0 on the right, and its attention mask. Right padding:
    a causal model's earlier positions never see the padding after them."""
    mask = pad_sequence([torch.ones_like(s) for s in sequences], batch_first=True)
    return pad_sequence(sequences, batch_first=True), mask


@torch.inference_mode()
def label_answers(target: LoadedModel, prompts: list[str], answers: list[str], max_tokens: int,
                  top_k: int) -> list[Example]:
    """The target reads given answers (teacher forcing); keep its top-k at each answer position."""
    tokenizer, model = target.tokenizer, target.model
    sequences, starts = [], []
    for prompt, answer in zip(prompts, answers, strict=True):
        prompt_ids = target.chat_ids(prompt)
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"][:max_tokens]
        sequences.append(prompt_ids + answer_ids)
        starts.append(len(prompt_ids))
    input_ids, mask = right_padded([torch.tensor(sequence) for sequence in sequences])
    # The target's device for the pass; the labels come back to the CPU, where shards are stored.
    hidden = model.get_decoder()(input_ids=input_ids.to(model.device),
                                 attention_mask=mask.to(model.device)).last_hidden_state
    head = model.get_output_embeddings().weight[: target.vocab_size]
    examples = []
    for row, (sequence, start) in enumerate(zip(sequences, starts, strict=True)):
        # The positions predicting the answer.
        top_ids, top_probs = top_labels(hidden[row, start - 1 : len(sequence) - 1], head, top_k)
        examples.append(Example(torch.tensor(sequence), start, top_ids, top_probs))
    return examples


def top_labels(hidden: torch.Tensor, output_head: torch.Tensor, top_k: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's last hidden states (after its final norm) -> its top-k next tokens at each position
    and their probabilities (fp16): the draft's distillation label."""
    logits = hidden.to(output_head.device, output_head.dtype) @ output_head.T
    top_probs, top_ids = torch.softmax(logits.float(), -1).topk(top_k, dim=-1)
    return top_ids.cpu(), top_probs.half().cpu()  # labels are stored on the CPU, whatever labelled them


def make_stdlib_shards(target: LoadedModel, folder: Path, count: int, batch_size: int, max_tokens: int,
                       top_k: int, progress: Callable[[int, int], None] | None = None) -> list[Path]:
    """Label `count` standard-library blocks, `batch_size` per shard; existing shards are kept (resume)."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = stdlib_code_blocks(count)
    batches = [blocks[i : i + batch_size] for i in range(0, len(blocks), batch_size)]

    def label(index: int) -> list[Example]:
        prompts = [STDLIB_PROMPT.format(module=module) for module, _ in batches[index]]
        answers = [f"```python\n{source}\n```" for _, source in batches[index]]
        return label_answers(target, prompts, answers, max_tokens, top_k)

    return write_shards([folder / f"stdlib-{index:04d}.pt" for index in range(len(batches))], label, progress)
