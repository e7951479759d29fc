"""What stays on the model's device and what comes to the host, checked on a CPU.

No GPU is at hand, so the tests give the models an output head whose logits are `OnDevice`: CPU
tensors that stand for tensors in a GPU's memory. Whatever the engine computes from them stays
`OnDevice`; reading one on the host (`.cpu()`, `.tolist()`, `int()`, ...) is logged with its size;
and what a GPU refuses raises here too: an operation mixing device tensors with host tensors (other
than host indices and 0-d numbers, which a GPU takes), and a draw with the run's CPU generator from a
device tensor. The tests then check what the design promises (docs/howto/own-pair-and-gpu.md):
greedy rounds bring back ids and a few probabilities, never a row of the vocabulary, and timed passes
copy nothing of their logits to the host.
"""

from types import SimpleNamespace

import pytest
import torch
from torch.utils._pytree import tree_flatten

from specdec.config import SamplingConfig, Settings
from specdec.core.batch_cache import BatchCachedModel
from specdec.core.batch_drafters import BatchDrafter
from specdec.core.batch_rounds import batch_speculative_rounds
from specdec.core.cached_model import CachedModel
from specdec.core.drafters import ModelDrafter
from specdec.core.rounds import speculative_rounds, target_only_steps
from specdec.kernels.choice import _pass_seconds
from specdec.measure.batching import pass_cost
from specdec.measure.timing import forward_cost_by_size

PROMPT = [5, 17, 42, 8, 99, 3]
GREEDY, SAMPLED = SamplingConfig(temperature=0), SamplingConfig(temperature=1.0)
SMALL = 64  # more elements than any read a greedy round needs (ids, p and q at a few tokens, top 8s)

READS_TO_HOST = {torch.Tensor.cpu, torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.numpy,
                 torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__bool__, torch.Tensor.__index__}
HOST_INDICES_ALLOWED = {torch.Tensor.__getitem__, torch.Tensor.__setitem__}


class OnDevice(torch.Tensor):
    """A CPU tensor standing for one in a GPU's memory (see the module's docstring)."""

    reads: list[int] = []  # the size of every read to the host, in elements

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in READS_TO_HOST:
            cls.reads.append(args[0].numel())
            with torch._C.DisableTorchFunctionSubclass():
                return func(args[0].as_subclass(torch.Tensor), *args[1:], **kwargs)
        if func is torch.Tensor.to and "cpu" in map(str, [*args[1:], *kwargs.values()]):
            cls.reads.append(args[0].numel())
            with torch._C.DisableTorchFunctionSubclass():
                return args[0].as_subclass(torch.Tensor)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        on_host = [t for t in tensors if not isinstance(t, OnDevice) and t.dim() > 0]
        if on_host and len(on_host) < len(tensors) and func not in HOST_INDICES_ALLOWED:
            raise RuntimeError(f"{getattr(func, '__name__', func)}: tensors on the device and on the host")
        if isinstance(kwargs.get("generator"), torch.Generator):
            raise RuntimeError("the run's CPU generator cannot draw from a tensor on the device")
        return super().__torch_function__(func, types, args, kwargs)


@pytest.fixture
def on_device(monkeypatch):
    """-> place(model): from now on the model's output head returns its logits `OnDevice`. The
    reads to the host are logged afresh for each test in OnDevice.reads."""
    monkeypatch.setattr(OnDevice, "reads", [])

    def place(model):
        head = model.get_output_embeddings()
        forward = head.forward
        monkeypatch.setattr(head, "forward", lambda hidden: forward(hidden).as_subclass(OnDevice))
        return model

    return place


def plain_greedy(target_model, vocab, count):
    steps = target_only_steps(CachedModel(target_model, vocab), PROMPT, GREEDY, torch.Generator(), count)
    return [step.token for step in steps]


def speculative(target_model, draft_model, vocab, sampling, count, detail=False, seed=0):
    settings = Settings(gamma=4, sampling=sampling, max_new_tokens=count)
    target = CachedModel(target_model, vocab, pass_costs=(1.0, 1.0, 1.05, 1.1, 1.2, 1.3))
    return list(speculative_rounds(target, ModelDrafter(draft_model, vocab), PROMPT, settings,
                                   torch.Generator().manual_seed(seed), detail=detail))


def emitted(traces):
    return [token for trace in traces for token in trace.emitted_tokens]


def test_the_stand_in_refuses_what_a_gpu_refuses_and_logs_reads():
    """Negative controls: without these the tests below could pass on code a GPU would reject."""
    logits = torch.randn(3, 50).as_subclass(OnDevice)
    OnDevice.reads = []
    probs = logits.softmax(dim=-1)
    assert isinstance(probs, OnDevice) and isinstance(probs.argmax(dim=-1), OnDevice)
    with pytest.raises(RuntimeError, match="device and on the host"):
        probs == torch.zeros(3, 50)  # noqa: B015
    with pytest.raises(RuntimeError, match="generator"):
        torch.multinomial(probs[0], 1, generator=torch.Generator())
    assert probs[torch.arange(2), torch.tensor([4, 5])].shape == (2,)  # host indices: a GPU takes them
    assert not OnDevice.reads
    probs.cpu()
    probs.argmax(dim=-1).tolist()
    int(probs[0].argmax())
    assert OnDevice.reads == [150, 3, 1]


def test_greedy_rounds_bring_back_ids_and_a_few_probabilities(sharp_target, unsure_draft, vocab, on_device):
    """T = 0, lean traces as bench runs them, adaptive drafting on: the output is
    plain greedy's, and no read to the host is anywhere near a row of the vocabulary."""
    expected = plain_greedy(sharp_target, vocab, 40)
    on_device(sharp_target)
    on_device(unsure_draft)
    traces = speculative(sharp_target, unsure_draft, vocab, GREEDY, 40)
    assert emitted(traces) == expected
    assert max(OnDevice.reads) < SMALL < vocab
    # Not vacuous: rejections, and reads in every round.
    assert any(t.num_accepted < t.num_drafted for t in traces)
    assert len(OnDevice.reads) > 3 * len(traces)


def test_greedy_round_view_reads_only_the_shown_tokens(sharp_target, unsure_draft, vocab, on_device):
    """The round view's traces (top-token tables of p and q) are read at their shown tokens only."""
    on_device(sharp_target)
    on_device(unsure_draft)
    traces = speculative(sharp_target, unsure_draft, vocab, GREEDY, 16, detail=True)
    assert traces[0].positions and traces[0].positions[0].target_probs
    assert max(OnDevice.reads) < SMALL


def test_sampled_rounds_draw_on_the_host_and_replay(sharp_target, unsure_draft, vocab, on_device):
    """T = 1: the rows a draw needs come to the host for the run's CPU generator, so a seed gives the
    same tokens with the models 'on the device' as without."""
    host = emitted(speculative(sharp_target, unsure_draft, vocab, SAMPLED, 24, seed=3))
    on_device(sharp_target)
    on_device(unsure_draft)
    assert emitted(speculative(sharp_target, unsure_draft, vocab, SAMPLED, 24, seed=3)) == host
    assert max(OnDevice.reads) >= vocab  # the sampled path may stay on the host


def test_batched_greedy_rounds_stay_on_the_device(sharp_target, unsure_draft, vocab, on_device):
    prompts = [PROMPT, PROMPT[:3]]
    settings = Settings(gamma=4, sampling=GREEDY, max_new_tokens=16)
    expected = [emitted(list(speculative_rounds(CachedModel(sharp_target, vocab),
                                                ModelDrafter(unsure_draft, vocab), prompt, settings,
                                                torch.Generator()))) for prompt in prompts]
    on_device(sharp_target)
    on_device(unsure_draft)
    target = BatchCachedModel(sharp_target, vocab, len(prompts))
    drafter = BatchDrafter(len(prompts), vocab, model=unsure_draft)
    rows = [[] for _ in prompts]
    for batch_round in batch_speculative_rounds(target, drafter, prompts, settings,
                                                [torch.Generator() for _ in prompts]):
        for row, trace in zip(batch_round.rows, batch_round.traces, strict=True):
            rows[row] += trace.emitted_tokens
    assert rows == expected
    assert max(OnDevice.reads) < SMALL


def test_timed_passes_copy_no_logits_to_the_host(sharp_target, vocab, on_device):
    """The idle machine's curve, the batch page's cost curve and the pass costs timed at load: each
    times the pass and leaves its logits where the model computed them."""
    on_device(sharp_target)
    pair = SimpleNamespace(target=SimpleNamespace(model=sharp_target, vocab_size=vocab))
    curve = list(forward_cost_by_size(pair, PROMPT, sizes=(1, 4), repeats=2))
    assert [row["tokens"] for row in curve] == [1, 4]
    assert pass_cost(pair, rows=2, tokens_per_row=3, repeats=1) > 0
    assert _pass_seconds(sharp_target, tokens=3, repeats=1) > 0
    assert all(size < vocab for size in OnDevice.reads)

