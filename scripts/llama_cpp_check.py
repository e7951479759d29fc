"""The exported draft in llama.cpp, run for real through llama-cpp-python (not part of the set-up).

    python -m venv ~/llama-cpp && ~/llama-cpp/bin/pip install llama-cpp-python==0.3.36   # builds llama.cpp
    .venv/bin/python -m specdec export-draft ./smollm2-draft --gguf
    ~/llama-cpp/bin/python scripts/llama_cpp_check.py --target-gguf <the bundled Q4_1 file> \
        --draft-gguf ./smollm2-draft/SmolLM2-135M-Instruct-draft.F32.gguf

For held-out prompts of three kinds, greedy, in the target's chat template: the target alone, the target
with the exported draft proposing γ tokens a round, and the target with llama-cpp-python's own prompt
lookup. All three run in one process, in turn per prompt. It prints tokens/s, each drafter's ratio to
the target alone, and whether its text equals the target's. llama-cpp-python's loop keeps a draft
while it equals the token the target samples there (at temperature 0: its argmax), so greedy output
must not change.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts"


class GGUFDraft(LlamaDraftModel):
    """A draft model from a GGUF file: greedy, γ tokens a round, its KV cache kept across rounds."""

    def __init__(self, path: str, gamma: int, threads: int):
        self.llm = Llama(model_path=path, n_ctx=2048, n_threads=threads, verbose=False)
        self.gamma = gamma

    def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
        tokens = input_ids.tolist()
        seen = self.llm.input_ids[: self.llm.n_tokens].tolist()
        common = 0
        while common < min(len(seen), len(tokens)) and seen[common] == tokens[common]:
            common += 1
        self.llm.n_tokens = min(common, len(tokens) - 1)  # keep the shared prefix, re-read the rest
        self.llm.eval(tokens[self.llm.n_tokens:])
        drafts = []
        for _ in range(self.gamma):
            token = self.llm.sample(temp=0.0)
            drafts.append(token)
            self.llm.eval([token])
        return np.array(drafts, dtype=np.intc)


def chat_prompt(llm: Llama, text: str) -> list[int]:
    metadata = llm.metadata
    formatter = Jinja2ChatFormatter(metadata["tokenizer.chat_template"], eos_token="<|im_end|>", bos_token="")
    prompt = formatter(messages=[{"role": "user", "content": text}]).prompt
    return llm.tokenize(prompt.encode(), add_bos=False, special=True)


def decode(llm: Llama, tokens: list[int], new_tokens: int) -> tuple[list[int], float]:
    output, start = [], time.perf_counter()
    for token in llm.generate(tokens, temp=0.0, top_k=1, reset=True):
        if token == llm.token_eos() or len(output) == new_tokens:
            break
        output.append(token)
    return output, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-gguf", required=True)
    parser.add_argument("--draft-gguf", required=True)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-set", type=int, default=3)
    args = parser.parse_args()
    common = {"model_path": args.target_gguf, "n_ctx": 2048, "n_threads": args.threads, "verbose": False}
    runners = {
        "target alone": Llama(**common),
        "exported draft": Llama(**common, draft_model=GGUFDraft(args.draft_gguf, args.gamma, args.threads)),
        "prompt lookup": Llama(**common, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.gamma)),
    }
    print(f"llama-cpp-python, {args.threads} thread(s), greedy, {args.new_tokens} new tokens, "
          f"γ = {args.gamma}")
    for llm in runners.values():  # the first generation allocates and faults in its buffers: not timed
        decode(llm, chat_prompt(llm, "Hello"), 8)
    for name in ("code", "prose", "summaries"):
        prompts = json.loads((PROMPTS / f"{name}.json").read_text())["prompts"][: args.per_set]
        totals = {label: [0, 0.0] for label in runners}
        same = {label: 0 for label in runners}
        for text in prompts:
            reference = None
            for label, llm in runners.items():
                output, seconds = decode(llm, chat_prompt(llm, text), args.new_tokens)
                totals[label][0] += len(output)
                totals[label][1] += seconds
                reference = output if reference is None else reference
                same[label] += output == reference
        plain = totals["target alone"][0] / totals["target alone"][1]
        cells = [f"{label} {tokens / seconds:.1f} tok/s ({tokens / seconds / plain:.2f}x, same text "
                 f"{same[label]}/{len(prompts)})" for label, (tokens, seconds) in totals.items()]
        print(f"{name:9s} " + "; ".join(cells))


if __name__ == "__main__":
    main()
