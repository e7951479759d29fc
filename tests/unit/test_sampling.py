import pytest
import torch

from specdec.config import SamplingConfig
from specdec.core.sampling import sample, warp_probs
from specdec.errors import SpecDecError

LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0]])


def test_plain_softmax_at_temperature_one():
    torch.testing.assert_close(warp_probs(LOGITS, SamplingConfig()), torch.softmax(LOGITS, -1))


def test_temperature_divides_logits():
    torch.testing.assert_close(
        warp_probs(LOGITS, SamplingConfig(temperature=0.5)), torch.softmax(LOGITS / 0.5, -1)
    )


def test_top_k_keeps_k_tokens_renormalised():
    probs = warp_probs(LOGITS, SamplingConfig(top_k=2))[0]
    assert (probs[2:] == 0).all()
    torch.testing.assert_close(probs[:2], torch.softmax(LOGITS[0, :2], -1))


def test_top_p_keeps_the_smallest_set_with_that_mass():
    probs = warp_probs(LOGITS, SamplingConfig(top_p=0.7))[0]  # softmax: 0.64, 0.24, 0.09, 0.03
    assert (probs > 0).tolist() == [True, True, False, False]


def test_greedy_sample_is_argmax_and_rows_are_independent():
    probs = warp_probs(torch.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, 1.0]]), SamplingConfig(temperature=0))
    assert sample(probs, SamplingConfig(temperature=0), torch.Generator()).tolist() == [1, 0]


@pytest.mark.parametrize(
    "kwargs, message",
    [({"temperature": -0.1}, "temperature"), ({"top_p": 0.0}, "top-p"), ({"top_p": 1.5}, "top-p"),
     ({"top_k": -1}, "top-k")],
)
def test_bad_settings_are_refused_with_a_message(kwargs, message):
    with pytest.raises(SpecDecError, match=message):
        SamplingConfig(**kwargs)
