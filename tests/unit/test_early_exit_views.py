"""What the pages show of the early exit: the picture of the target's layers, which engines run it, which
links may ask for it, and the server's measured memory per load (no model loaded here)."""

import mmap
from types import SimpleNamespace

import pytest

from specdec.errors import SpecDecError
from specdec.serving.allowed_models import PairShelf, allowed_models, check_allowed
from specdec.views.charts import early_exit_chart
from specdec.views.memory import memory_line


@pytest.mark.parametrize(("depth", "layer", "adapter"), [(30, 4, True), (30, 8, False), (3, 2, True)])
def test_the_picture_draws_every_layer_and_the_branch(depth, layer, adapter):
    fig = early_exit_chart(depth, layer, adapter)
    rectangles = [s for s in fig.layout.shapes if s.type == "rect"]
    # every layer, the two norm-and-head boxes, and the adapter if there is one
    assert len(rectangles) == depth + 2 + adapter
    shared = {s.fillcolor for s in rectangles[:layer]}
    deeper = {s.fillcolor for s in rectangles[layer:depth]}
    assert len(shared) == len(deeper) == 1 and shared != deeper  # layers 1..L drawn as one kind
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert f"layers 1–{layer}" in texts and ("exit adapter" in texts) == adapter
    assert "no adapter" in texts or adapter


def test_early_exit_names_pass_a_links_allow_list_and_load_nothing_new():
    allowed = allowed_models({})
    check_allowed("bundled:SmolLM2-135M-Instruct", "early:4", allowed)
    check_allowed("bundled:SmolLM2-135M-Instruct", "ngram+bundled:SmolLM2-135M-Instruct-exit", allowed)
    with pytest.raises(SpecDecError, match="early exit takes"):
        check_allowed("bundled:SmolLM2-135M-Instruct", "early:zero", allowed)
    with pytest.raises(SpecDecError, match="does not load the drafter"):
        check_allowed("bundled:SmolLM2-135M-Instruct", "someone/else", allowed)


def test_the_shelf_keeps_what_each_load_added_to_resident_memory():
    ballast = []

    class Pair(SimpleNamespace):
        def with_drafter(self, drafter):
            first = drafter.endswith("big") and not ballast  # loaded once, behind lookup or alone
            # A load of 40 MiB, or none: fresh pages from the kernel (mmap), not memory the allocator
            # kept from earlier tests in this process, which is resident already and would add nothing.
            ballast.append(mmap.mmap(-1, 40 * 2**20) if first else bytearray())
            for page in range(0, len(ballast[-1]), 4096):  # touched, so it is resident
                ballast[-1][page] = 1
            return Pair(target=self.target, drafter=drafter, exit=None)

    shelf = PairShelf(lambda name: Pair(target=SimpleNamespace(name=name), exit=None))
    shelf.get("t", "ngram+big")
    shelf.get("t", "big")  # the same model behind lookup and alone: its first load counts
    shelf.get("t", "ngram")
    added = shelf.resident_added
    assert list(added) == ["t", "big", "ngram"]
    assert 35 * 2**20 < added["big"] < 60 * 2**20
    assert abs(added["ngram"]) < 5 * 2**20
    assert shelf.own_bytes == {}  # no drafter here counts its own tensors
    shelf.clear()
    assert shelf.resident_added == {}


def test_the_shelf_keeps_an_exits_count_of_its_own_tensors_beside_the_measured_figure():
    class Pair(SimpleNamespace):
        def with_drafter(self, drafter):
            exit = SimpleNamespace(own_bytes=25 * 2**20) if drafter.endswith("exit") else None
            return Pair(target=self.target, exit=exit)

    shelf = PairShelf(lambda name: Pair(target=SimpleNamespace(name=name), exit=None))
    shelf.get("t", "ngram+my-exit")
    shelf.get("t", "draft")
    assert shelf.own_bytes == {"my-exit": 25 * 2**20}
    line = memory_line(shelf.resident_added, "t", shelf.own_bytes)
    assert "my-exit +" in line and "(its own tensors: 25 MiB)" in line
    assert "draft +" in line and line.count("its own tensors") == 1
    shelf.clear()
    assert shelf.own_bytes == {}


def test_in_your_stack_says_which_engines_run_an_early_exit():
    from specdec.measure import stack

    assert "assistant_early_exit=L" in stack.EARLY_EXIT_ENGINES and "LayerSkip" in stack.EARLY_EXIT_ENGINES
    assert "vLLM" in stack.EARLY_EXIT_ENGINES and "llama.cpp" in stack.EARLY_EXIT_ENGINES
    exit_pair = SimpleNamespace(exit=object(), head=None, draft=None)
    with pytest.raises(SpecDecError, match="assistant_early_exit"):
        stack.assistant_for(exit_pair)
