"""Prompts for the data campaign: many kinds, made by templates from lists, one per index.

Prompt i depends only on (seed, i): a campaign that grows later keeps every prompt it already
answered, and two machines agree on the list. Each index picks a kind by weight, then a template and
its fillers (subjects, languages, formats, random numbers and names, or a passage of this Python's own
standard library for copy and edit tasks). No held-out prompt (assets/prompts) is among them, nor any
held-out passage: a test checks. No torch here.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import platform
import random
import sysconfig
from functools import cache
from pathlib import Path

from specdec.paths import cache_root
from specdec.training.data import (
    CODE_TASKS,
    MORE_CODE_TASKS,
    MORE_PROSE_TOPICS,
    PROSE_TOPICS,
    SQL_TASKS,
    STDLIB_SKIP,
    TOP_LEVEL_BLOCK,
)

# Kind -> share of the campaign. Code leads (where speculation pays most), every kind is present.
KIND_WEIGHTS = {"code": 0.34, "structured": 0.14, "prose": 0.14, "math": 0.12, "questions": 0.12,
                "copy_edit": 0.14}
KINDS = list(KIND_WEIGHTS)

LANGUAGES = ["Python"] * 6 + ["JavaScript"] * 2 + ["TypeScript", "Go", "Rust", "Java", "C", "C++", "Ruby",
                                                   "Bash", "PHP", "Kotlin", "C#"]
EXTRA_CODE_TASKS = [
    "counts the lines that contain a given word", "parses a simple arithmetic expression",
    "converts a hex colour to RGB values", "finds the shortest path in a grid",
    "checks whether a board of tic-tac-toe has a winner", "reads numbers from standard input and "
    "prints their sum", "formats a duration in seconds as hours, minutes and seconds",
    "compresses a string with run-length encoding", "decompresses a run-length encoded string",
    "checks whether a string is a valid IPv4 address", "returns the prime factors of a number",
    "finds the longest increasing subsequence", "computes the edit distance between two words",
    "implements a min-heap", "implements a trie with insert and search", "counts the islands in a grid",
    "converts a temperature table from Fahrenheit to Celsius", "sends a GET request and prints the "
    "status code", "walks a directory tree and sums the file sizes", "renames every file in a folder "
    "to lower case", "splits a list into two halves", "interleaves two lists", "finds the mode of a list",
    "counts the set bits of an integer", "reverses the bits of a byte", "implements a simple state "
    "machine for a traffic light", "validates a date in the format YYYY-MM-DD",
    "computes the checksum of a file", "caches the results of an expensive call for a minute",
    "paginates a list of items", "debounces a function call", "throttles a function call",
    "deep-merges two configuration objects", "implements a simple event emitter",
    "parses a query string into a dictionary", "escapes HTML special characters",
    "generates a UUID and prints it", "computes the angle between clock hands",
    "finds anagrams of a word in a list", "implements a rate limiter with a token bucket",
]
CODE_TEMPLATES = [
    "Write a {lang} function that {task}.",
    "Write a {lang} function that {task}. Add comments.",
    "Show me {lang} code that {task}, with an example.",
    "How do I write a {lang} program that {task}?",
    "Write a short {lang} program that {task} and prints the result.",
    "Write a {lang} function that {task}, and explain it briefly.",
    "Implement a {lang} function that {task}. Keep it short and idiomatic.",
    "Give me a {lang} snippet that {task}.",
]
SQL_EXTRA = [
    "finds the three most recent orders of each customer", "counts the users who signed up each month",
    "lists the books borrowed more than twice", "computes the total stock value per warehouse",
    "finds the employees who earn more than their manager", "lists the cities with more than ten stores",
]

STRUCTURED_FORMATS = ["JSON", "a JSON array", "YAML", "TOML", "XML", "HTML", "CSV", "a Markdown table",
                      "a Markdown bullet list", "an INI file"]
STRUCTURED_CONTENTS = [
    "five books with their title, author and year", "a user profile with name, email, age and city",
    "the eight planets and their order from the sun", "a weekly school timetable",
    "three recipes with their ingredients", "a list of countries and their capitals",
    "the settings of a database connection", "a shopping list with quantities and prices",
    "the employees of a small company with their roles", "a product catalogue of four laptops",
    "the months of the year and their number of days", "a to-do list with due dates and priorities",
    "the results of a football league table", "a train timetable between two cities",
    "the contact details of three people", "a list of programming languages and the year they appeared",
    "the nutrition facts of an apple", "a playlist of six songs with artists and durations",
    "the chemical elements from hydrogen to neon", "the configuration of a logging system",
    "a restaurant menu with prices", "the members of a band and their instruments",
    "an invoice with three line items", "the opening hours of a shop for each day",
    "a list of five movies with their directors", "the inventory of a small bookshop",
    "the steps of a deployment pipeline", "three hiking trails with length and difficulty",
    "a class roster with student names and grades", "the colours of the rainbow with hex codes",
]
STRUCTURED_TEMPLATES = [
    "Write {content} as {format}.", "Give me {content} in {format}.",
    "Format {content} as {format}.", "Create {format} that lists {content}.",
    "Represent {content} in {format}. Output only the {format_bare}.",
]

PROSE_FORMS = ["a short story", "a short poem", "a haiku", "a diary entry", "a letter", "a short blog post",
               "a description", "a short speech", "a product review", "a short news report",
               "a dialogue between two friends", "a limerick", "a paragraph for a travel guide",
               "a fable with a moral"]
EXTRA_PROSE_TOPICS = [
    "a rainy morning in a big city", "a lost key", "the last day of summer", "a robot who collects stamps",
    "a mountain village in winter", "the first day of spring", "a street musician", "an old bicycle",
    "a birthday surprise", "a quiet museum", "a hot air balloon ride", "the school science fair",
    "a family of ducks", "a night at the observatory", "a new neighbour", "a broken clock",
    "a walk in the fog", "a kite festival", "the first snowman of the year", "an island with no name",
]
PROSE_TEMPLATES = ["Write {form} about {topic}.", "Please write {form} about {topic}.",
                   "Compose {form} about {topic}.", "Write {form} inspired by {topic}."]

NAMES = ["Anna", "Ben", "Carla", "David", "Emma", "Felix", "Grace", "Hugo", "Ines", "Jack", "Lena", "Omar",
         "Priya", "Ravi", "Sofia", "Tariq", "Uma", "Victor", "Yuki", "Zoe"]
ITEMS = ["apples", "pencils", "stickers", "marbles", "cookies", "books", "cards", "flowers", "eggs", "stamps"]
MATH_TEMPLATES = [
    "{name} has {a} {item}. {name2} gives {name} {b} more, and {name} gives away {c}. How many {item} "
    "does {name} have now?",
    "A box holds {a} {item}. How many boxes are needed for {big} {item}?",
    "{name} saves {a} dollars a week. How many weeks does it take to save {big} dollars?",
    "A car travels {a} km per hour. How long does it take to travel {big} km?",
    "A garden is {a} metres long and {b} metres wide. What is its area, and how much fence goes "
    "around it?",
    "A jacket costs {big} dollars and is sold at {pct} percent off. What does it cost now?",
    "{name} is {a} years old. {name2} is {b} years older. How old will {name2} be in {c} years?",
    "There are {a} rows of {b} chairs in a hall, and {c} chairs are taken. How many are free?",
    "A recipe needs {a} eggs for {b} people. How many eggs are needed for {c2} people?",
    "{name} reads {a} pages on Monday and twice as many on Tuesday. How many pages is that in total?",
    "A tank holds {big} litres and is filled at {a} litres a minute. How long does it take to fill?",
    "The average of three numbers is {a}. Two of them are {b} and {c}. What is the third?",
    "A class has {big} students and {pct} percent of them walk to school. How many walk?",
    "{name} buys {a} notebooks at {b} dollars each and pays with a {big}-dollar note. What is the change?",
]
MATH_SUFFIXES = ["", " Explain step by step.", " Show your working.", " Solve it step by step.",
                 " Give the answer and your reasoning."]

QUESTION_TEMPLATES = [
    "What is {thing}?", "How does {thing} work?", "Explain {thing} in simple terms.",
    "What is {thing} used for?", "Give a short explanation of {thing}.", "Tell me three facts about {thing}.",
]
QUESTION_THINGS = [
    "photosynthesis", "a black hole", "the water cycle", "gravity", "a volcano", "the immune system",
    "a rainbow", "electricity", "the internet", "a vaccine", "a compass", "the greenhouse effect",
    "a microwave oven", "an earthquake", "DNA", "the Great Wall of China", "the Roman Empire",
    "the printing press", "a solar eclipse", "the stock market", "a refrigerator", "inflation",
    "a lighthouse", "the Moon's phases", "a hurricane", "the human skeleton", "a battery",
    "the Olympic Games", "the Amazon rainforest", "a telescope", "a democracy", "a glacier",
    "the speed of light", "an atom", "a bee colony", "the Renaissance", "a GPS receiver",
    "the metric system", "a calendar leap year", "a tsunami", "a coral reef", "the French Revolution",
    "a steam engine", "the periodic table", "a food chain", "a credit card", "an electric car",
    "the ozone layer", "a submarine", "the human brain", "a desert", "the Silk Road", "a bridge",
    "an airplane wing", "a wind turbine", "a search engine", "a password manager", "the Industrial "
    "Revolution", "a thermometer", "a satellite", "the blood circulation", "a nuclear reactor",
    "the Pyramids of Giza", "a fungus", "the tides", "a barcode", "a camera lens", "an elevator",
]
DIRECT_QUESTIONS = [
    "Who painted the Mona Lisa?", "What is the largest ocean on Earth?", "How far is the Moon from Earth?",
    "What is the tallest mountain in the world?", "Why do we have seasons?", "What language is spoken "
    "in Brazil?", "How many bones does an adult human have?", "What is the boiling point of water?",
    "Why is the ocean salty?", "Who invented the telephone?", "What is the capital of Canada?",
    "How do birds know where to migrate?", "Why do cats purr?", "What causes thunder?",
    "What is the longest river in Africa?", "Who was the first person to walk on the Moon?",
    "How many continents are there? Name them.", "What is the chemical symbol for gold?",
    "Why do we need sleep?", "What is the difference between a virus and a bacterium?",
]

COPY_PROSE_TASKS = [
    "Summarise this text in two sentences:", "Rewrite this text in simpler words:",
    "Turn this text into a bulleted list of its main points:", "Repeat this text, fixing any typos:",
    "Shorten this text to half its length, keeping its wording where you can:",
    "Give a one-line summary of this text:", "Rewrite this text in a more formal tone:",
    "Copy this text and put each sentence on its own line:",
]
COPY_CODE_TASKS = [
    "Add comments to this code and print it again:", "Explain what this code does:",
    "Add type hints to this Python code:", "Rewrite this code with clearer variable names:",
    "Repeat this code exactly, then explain its first line:", "Find a possible bug in this code:",
    "Write a docstring for this code and show the whole code with it:",
    "Translate this Python code to JavaScript:",
]

DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@cache
def stdlib_passages() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(prose passages, code passages) from this Python's standard library: docstrings (of modules,
    classes and functions) of 150-900 characters, and top-level functions or classes of 150-900
    characters; sorted, so the same Python gives the same list.

    Reading them parses the whole library (seconds: docs/LOG.md, "The fast loop under a minute"), so
    they are kept in the cache folder (~/.cache/specdec or $SPECDEC_CACHE), one file per Python version
    and library folder."""
    root = Path(sysconfig.get_paths()["stdlib"])
    tag = hashlib.sha256(f"{platform.python_version()} {root}".encode()).hexdigest()[:12]
    kept = cache_root() / f"stdlib-passages-{platform.python_version()}-{tag}.json"
    try:
        prose, code = json.loads(kept.read_text(encoding="utf-8"))
        return tuple(prose), tuple(code)
    except (OSError, ValueError):
        pass
    passages = _read_stdlib_passages(root)
    with contextlib.suppress(OSError):  # a read-only checkout reads the library each time
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(passages), encoding="utf-8")
    return passages


def _read_stdlib_passages(root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    prose, code = set(), set()
    for path in sorted(root.rglob("*.py")):
        if STDLIB_SKIP & set(path.relative_to(root).parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        try:
            nodes = [n for n in ast.walk(ast.parse(text)) if isinstance(n, DOCUMENTED)]
        except (SyntaxError, ValueError):
            nodes = []
        prose.update(d for d in map(ast.get_docstring, nodes) if d and 150 <= len(d) <= 900)
        blocks = (m.group() for m in TOP_LEVEL_BLOCK.finditer(text))
        code.update(block.rstrip() for block in blocks if 150 <= len(block) <= 900)
    return tuple(sorted(prose)), tuple(sorted(code))


def _code(rng: random.Random) -> str:
    if rng.random() < 0.08:
        return rng.choice(["Write a SQL query that {task}.", "Write an SQL statement that {task}."]).format(
            task=rng.choice(SQL_TASKS + SQL_EXTRA))
    task = rng.choice(CODE_TASKS + MORE_CODE_TASKS + EXTRA_CODE_TASKS)
    return rng.choice(CODE_TEMPLATES).format(lang=rng.choice(LANGUAGES), task=task)


def _structured(rng: random.Random) -> str:
    form = rng.choice(STRUCTURED_FORMATS)
    bare = form.removeprefix("a ").removeprefix("an ")
    return rng.choice(STRUCTURED_TEMPLATES).format(content=rng.choice(STRUCTURED_CONTENTS), format=form,
                                                   format_bare=bare)


def _prose(rng: random.Random) -> str:
    topic = rng.choice(PROSE_TOPICS + MORE_PROSE_TOPICS + EXTRA_PROSE_TOPICS)
    return rng.choice(PROSE_TEMPLATES).format(form=rng.choice(PROSE_FORMS), topic=topic)


def _math(rng: random.Random) -> str:
    name, name2 = rng.sample(NAMES, 2)
    fillers = {"name": name, "name2": name2, "item": rng.choice(ITEMS), "a": rng.randint(2, 40),
               "b": rng.randint(2, 30), "c": rng.randint(1, 15), "c2": rng.randint(2, 12),
               "big": rng.randint(5, 60) * 10, "pct": rng.choice([10, 15, 20, 25, 30, 40, 50])}
    return rng.choice(MATH_TEMPLATES).format(**fillers) + rng.choice(MATH_SUFFIXES)


def _question(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return rng.choice(DIRECT_QUESTIONS)
    return rng.choice(QUESTION_TEMPLATES).format(thing=rng.choice(QUESTION_THINGS))


def _copy_edit(rng: random.Random) -> str:
    prose, code = stdlib_passages()
    if rng.random() < 0.5:
        return f"{rng.choice(COPY_PROSE_TASKS)}\n\n{rng.choice(prose)}"
    return f"{rng.choice(COPY_CODE_TASKS)}\n\n```python\n{rng.choice(code)}\n```"


MAKERS = {"code": _code, "structured": _structured, "prose": _prose, "math": _math, "questions": _question,
          "copy_edit": _copy_edit}


def campaign_prompt(index: int, seed: int = 0) -> tuple[str, str]:
    """(kind, prompt) number `index` of the campaign with this seed."""
    rng = random.Random(f"specdec-campaign-{seed}-{index}")
    kind = rng.choices(KINDS, weights=list(KIND_WEIGHTS.values()))[0]
    return kind, MAKERS[kind](rng)
