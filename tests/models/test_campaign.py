"""The data campaign: its prompts, its shards (features captured while writing), resuming, refilling."""

import copy
import json
import re
from collections import Counter
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from specdec.config import CAMPAIGN_GOAL, DraftTrainingConfig, HeadTrainingConfig
from specdec.errors import SpecDecError
from specdec.models.loading import HEAD_TOKENS_FILE, SHIPPED_DRAFT, LoadedModel
from specdec.paths import CAMPAIGN_ANSWERS, GREEDY_CAMPAIGN_ANSWERS, HELD_OUT_PROMPT_SETS, LATER_PROMPT_SETS
from specdec.training import campaign
from specdec.training import train_draft as draft_training
from specdec.training.campaign import (
    Answer,
    existing_shards,
    frequent_answer_tokens,
    labelled_campaign_shards,
    load_answers,
    load_campaign,
    read_summary,
    run_campaign,
    save_answers,
    shard_paths,
)
from specdec.training.campaign_prompts import KIND_WEIGHTS, KINDS, campaign_prompt
from specdec.training.features import target_features
from specdec.training.train_draft import build_draft, train_draft, trainable_state


@pytest.fixture(scope="module")
def prompts():
    """The first 4,000 prompts (built when a test asks: the copy-edit kind reads the whole standard
    library, seconds that collecting the tests, in every worker, should not pay)."""
    return [campaign_prompt(index) for index in range(4000)]

KEPT_CAMPAIGNS = [CAMPAIGN_ANSWERS, GREEDY_CAMPAIGN_ANSWERS]  # the answers kept with the project


def test_a_prompt_depends_only_on_its_index_and_seed(prompts):
    assert campaign_prompt(123) == prompts[123]  # not on what was asked before
    assert campaign_prompt(123, seed=1) != prompts[123]
    counts = Counter(kind for kind, _ in prompts)
    for kind, weight in KIND_WEIGHTS.items():
        assert abs(counts[kind] / len(prompts) - weight) < 0.03, kind
    assert len({prompt for _, prompt in prompts}) > 0.7 * len(prompts)  # few repeats


@pytest.mark.slow  # about a second on a 2-core machine: the whole suite runs it
def test_no_held_out_prompt_or_passage_is_in_the_campaign(prompts):
    """Over every prompt up to the campaign's goal or the last one a kept campaign answered, whichever is
    further, not only the first few thousand."""
    last = max(CAMPAIGN_GOAL, *((read_summary(folder) or {}).get("answers", 0) for folder in KEPT_CAMPAIGNS))
    texts = {prompt for _, prompt in prompts}
    texts |= {campaign_prompt(index)[1] for index in range(len(prompts), last)}
    campaign_text = "\n".join(texts)
    for path in [*HELD_OUT_PROMPT_SETS.values(), *LATER_PROMPT_SETS.values()]:
        for held_out in json.loads(path.read_text())["prompts"]:
            assert held_out not in texts
            # Nor any sentence of it (the summaries' passages): 40 characters or more, word for word.
            for sentence in re.split(r"(?<=[.!?:])\s+", held_out):
                if len(sentence) >= 40:
                    assert sentence not in campaign_text, sentence


@pytest.mark.parametrize("folder", KEPT_CAMPAIGNS, ids=lambda folder: folder.name)
def test_the_kept_answers_answer_the_prompts_the_generator_makes_today(folder):
    """The shards kept with the project were written for campaign_prompt(i): if the generator changed,
    a resumed campaign would number its prompts differently from the answers already kept."""
    if not existing_shards(folder):
        pytest.skip("no campaign shards here")
    from transformers import AutoTokenizer

    from specdec.models.loading import bundled_target_folder

    tokenizer = AutoTokenizer.from_pretrained(bundled_target_folder())
    summary = read_summary(folder)
    last = existing_shards(folder) - 1
    for shard in sorted({0, last}):
        answers = load_answers(shard_paths(folder, folder, shard)[0])
        for row in (0, len(answers) - 1):
            kind, prompt = campaign_prompt(shard * summary["batch"] + row, summary["seed"])
            answer = answers[row]
            assert answer.kind == kind
            assert prompt in tokenizer.decode(answer.token_ids[: answer.answer_start])


def short_prompt(index: int, seed: int = 0) -> tuple[str, str]:
    """The campaign's prompt, cut to fit the tiny model's 256 positions (its tokenizer is byte-level)."""
    kind, prompt = campaign_prompt(index, seed)
    return kind, prompt[:60]


@pytest.fixture
def chat_target(tiny_target, tokenizer, monkeypatch):
    monkeypatch.setattr(campaign, "campaign_prompt", short_prompt)
    tokenizer = copy.deepcopy(tokenizer)  # with a chat template of its own
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} = {% endfor %}"
    return LoadedModel("tiny", tiny_target, tokenizer)


def test_shards_keep_answers_and_the_features_the_target_had_while_writing(chat_target, tmp_path):
    answers_dir, features_dir = tmp_path / "answers", tmp_path / "features"
    summary = run_campaign(chat_target, answers_dir, features_dir, total_answers=6, batch=3,
                           max_new_tokens=12)
    assert summary["shards"] == 2 and summary["answers"] == 6
    assert sum(summary["kinds"].values()) == 6 and set(summary["kinds"]) == set(KINDS)
    answers = load_campaign(answers_dir, features_dir)
    assert [a.kind for a in answers] == [campaign_prompt(i)[0] for i in range(6)]
    for index, answer in enumerate(answers):
        prompt_ids = chat_target.chat_ids(short_prompt(index)[1])
        assert answer.token_ids[: answer.answer_start].tolist() == prompt_ids
        assert answer.features.shape == (len(answer.token_ids), chat_target.model.config.hidden_size)
        # Captured in a left-padded batch while sampling = one teacher-forced pass over the answer alone.
        read_whole = target_features(chat_target.model, [answer.token_ids])[0]
        assert torch.allclose(answer.features.float(), read_whole.float(), atol=0.05, rtol=0.02)
    # Negative control: features one position off do not pass that comparison.
    read_whole = target_features(chat_target.model, [answers[0].token_ids])[0]
    assert not torch.allclose(answers[0].features[1:].float(), read_whole[:-1].float(), atol=0.05, rtol=0.02)


def test_greedy_answers_take_the_targets_argmax_after_every_position(chat_target):
    """answer_shard(greedy=True): each answer token is the argmax the target read off the features kept
    for the position before it (the features are the final norm's output, so the output head gives the
    logits). Sampled answers, the negative control, leave it somewhere."""
    prompts = [campaign_prompt(i) for i in range(4)]
    output_head = chat_target.model.get_output_embeddings().weight.float()

    def argmax_followed(answers):
        return all(torch.equal(a.token_ids[a.answer_start :],
                               (a.features[a.answer_start - 1 : -1].float() @ output_head.T).argmax(-1))
                   for a in answers)

    assert argmax_followed(campaign.answer_shard(chat_target, prompts, 12, seed=0, greedy=True))
    assert not argmax_followed(campaign.answer_shard(chat_target, prompts, 12, seed=0))


def test_a_greedy_campaign_keeps_greedy_answers_and_takes_no_sampled_ones(chat_target, tmp_path):
    answers_dir, features_dir = tmp_path / "greedy", tmp_path / "features"
    run_campaign(chat_target, answers_dir, features_dir, total_answers=4, batch=4, max_new_tokens=12,
                 greedy=True)
    stored = load_answers(shard_paths(answers_dir, features_dir, 0)[0])
    prompts = [campaign.campaign_prompt(i, 0) for i in range(4)]
    made = campaign.answer_shard(chat_target, prompts, 12, seed=7, greedy=True)  # any seed: greedy
    assert [a.token_ids.tolist() for a in stored] == [a.token_ids.tolist() for a in made]
    assert read_summary(answers_dir)["greedy"]
    with pytest.raises(SpecDecError, match="greedy"):  # sampled answers do not join a greedy campaign
        run_campaign(chat_target, answers_dir, features_dir, total_answers=8, batch=4, max_new_tokens=12)


def test_a_campaign_resumes_and_refills_missing_features(chat_target, tmp_path):
    answers_dir, features_dir = tmp_path / "answers", tmp_path / "features"
    run_campaign(chat_target, answers_dir, features_dir, total_answers=4, batch=2, max_new_tokens=8)
    first = (answers_dir / "answers-0000.safetensors").read_bytes()
    kept_features = load_campaign(answers_dir, features_dir)[1].features
    shard_paths(answers_dir, features_dir, 0)[1].unlink()  # as on a machine that has only the answers
    summary = run_campaign(chat_target, answers_dir, features_dir, total_answers=8, batch=2, max_new_tokens=8)
    assert summary["answers"] == 8 and existing_shards(answers_dir) == 4
    assert (answers_dir / "answers-0000.safetensors").read_bytes() == first  # kept, not rewritten
    refilled = load_campaign(answers_dir, features_dir)[1].features
    assert torch.allclose(refilled.float(), kept_features.float(), atol=0.05, rtol=0.02)
    assert len(load_campaign(answers_dir, features_dir, answers=3)) == 3
    # A goal below what the campaign holds fills in only its own shards' features, and writes no answers.
    for index in (0, 3):
        shard_paths(answers_dir, features_dir, index)[1].unlink()
    assert run_campaign(chat_target, answers_dir, features_dir, total_answers=2, batch=2,
                        max_new_tokens=8)["answers"] == 8
    assert [shard_paths(answers_dir, features_dir, i)[1].exists() for i in (0, 3)] == [True, False]
    with pytest.raises(SpecDecError, match="batch 2"):  # another batch size would renumber the prompts
        run_campaign(chat_target, answers_dir, features_dir, total_answers=12, batch=4, max_new_tokens=8)


def test_the_drafts_labels_are_the_targets_top_tokens_read_off_the_stored_features(chat_target, tmp_path):
    answers_dir, features_dir = tmp_path / "answers", tmp_path / "features"
    run_campaign(chat_target, answers_dir, features_dir, total_answers=4, batch=2, max_new_tokens=8)
    shards = labelled_campaign_shards(chat_target, answers_dir, features_dir, tmp_path / "labels", top_k=5)
    assert [path.name for path in shards] == ["campaign-0000.pt", "campaign-0001.pt"]
    examples = [e for path in shards for e in torch.load(path, weights_only=False)]
    answers = load_campaign(answers_dir, features_dir)
    assert [e.kind for e in examples] == [a.kind for a in answers]
    for example, answer in zip(examples, answers, strict=True):
        assert torch.equal(example.token_ids, answer.token_ids)
        assert example.answer_start == answer.answer_start
        with torch.no_grad():  # the target reading the answer: its distribution at every answer position
            logits = chat_target.model(answer.token_ids[None]).logits[0, answer.answer_start - 1 : -1]
        target_probs = torch.softmax(logits.float(), -1)
        assert example.top_ids.shape == (len(answer.token_ids) - answer.answer_start, 5)
        # The labels' probabilities are the target's own for those tokens, and they are its top 5.
        torch.testing.assert_close(example.top_probs.float(), target_probs.gather(1, example.top_ids),
                                   atol=0.01, rtol=0.05)
        assert (example.top_probs.float()[:, -1] >= target_probs.topk(5).values[:, -1] - 0.01).all()
    # Negative control: the target's distribution one position later is not what the labels say.
    late = torch.softmax(chat_target.model(answers[0].token_ids[None]).logits[0, answers[0].answer_start:]
                         .float(), -1).detach()
    assert not torch.allclose(examples[0].top_probs.float()[:-1], late.gather(1, examples[0].top_ids[:-1]),
                              atol=0.01, rtol=0.05)
    shard_paths(answers_dir, features_dir, 1)[1].unlink()  # answers without features: a clear message
    with pytest.raises(SpecDecError, match="specdec campaign"):
        labelled_campaign_shards(chat_target, answers_dir, features_dir, tmp_path / "other", top_k=5)


@pytest.mark.slow
def test_a_draft_trains_on_the_greedy_campaign_from_given_layers_and_token_list(chat_target, tmp_path,
                                                                                monkeypatch):
    # Only the greedy campaign has answers: a draft that read the sampled one's folders would find none.
    answers_dir, features_dir = tmp_path / "greedy-answers", tmp_path / "greedy-features"
    run_campaign(chat_target, answers_dir, features_dir, total_answers=6, batch=3, max_new_tokens=8,
                 greedy=True)
    monkeypatch.setattr(draft_training, "campaign_answers_folder",
                        lambda greedy=False: answers_dir if greedy else tmp_path / "answers")
    monkeypatch.setattr(draft_training, "campaign_features_folder",
                        lambda greedy=False: features_dir if greedy else tmp_path / "features")
    start = build_draft(chat_target.model, layers=1)
    with torch.no_grad():
        start.model.norm.weight.fill_(2.0)  # a mark the trained draft keeps: the learning rate is 0
    config = DraftTrainingConfig(layers=1, campaign=True, greedy=True, code_share=0.5, stdlib_blocks=0,
                                 batch_size=2, learning_rate=0.0, max_steps=2, eval_every=2, eval_tokens=3)
    # The sampled campaign is empty here: a clear message, with or without --answers.
    for empty in (replace(config, greedy=False), replace(config, greedy=False, answers=4)):
        with pytest.raises(SpecDecError, match="`python -m specdec campaign` first"):
            train_draft(chat_target, tmp_path / "work0", tmp_path / "draft0", empty, log=lambda _: None)
    card = train_draft(chat_target, tmp_path / "work", tmp_path / "draft", config, log=lambda _: None,
                       start_layers=trainable_state(start), head_token_ids=[3, 5, 7])
    assert card["answers"] == 6 and card["steps"] == 2
    assert card["labelled_positions"] == sum(len(a.token_ids) - a.answer_start
                                             for a in load_campaign(answers_dir, features_dir))
    saved = load_file(tmp_path / "draft" / "draft-layers.safetensors")
    assert (saved["model.norm.weight"] == 2.0).all()
    assert json.loads((tmp_path / "draft" / HEAD_TOKENS_FILE).read_text()) == [3, 5, 7]
    # --answers: the campaign's first answers only, as it stood at an earlier size (shards of 3 here).
    for answers, shards in ((4, 2), (3, 1)):
        work = tmp_path / f"work-{answers}"
        card = train_draft(chat_target, work, tmp_path / f"draft-{answers}", replace(config, answers=answers),
                           log=lambda _: None, head_token_ids=[3, 5, 7])
        assert card["answers"] == answers and len(list((work / "campaign").glob("*.pt"))) == shards
        assert card["labelled_positions"] == sum(len(a.token_ids) - a.answer_start
                                                 for a in load_campaign(answers_dir, features_dir, answers))
    with pytest.raises(SpecDecError, match="do not fit a 1-layer draft"):  # layers of another depth
        train_draft(chat_target, tmp_path / "work2", tmp_path / "draft2", config, log=lambda _: None,
                    start_layers=trainable_state(build_draft(chat_target.model, layers=2)))
    shard_paths(answers_dir, features_dir, 1)[1].unlink()  # the message names the greedy campaign's command
    with pytest.raises(SpecDecError, match="`python -m specdec campaign --greedy` fills them in"):
        labelled_campaign_shards(chat_target, answers_dir, features_dir, tmp_path / "other", top_k=5)


@pytest.mark.slow  # two tiny campaigns and two steps of training
def test_a_draft_trains_on_sampled_answers_with_greedy_ones_beside_them(chat_target, tmp_path, monkeypatch):
    folders = {greedy: (tmp_path / f"answers-{greedy}", tmp_path / f"features-{greedy}") for greedy in (0, 1)}
    for greedy, (answers_dir, features_dir) in folders.items():
        run_campaign(chat_target, answers_dir, features_dir, total_answers=4, batch=2, max_new_tokens=8,
                     greedy=bool(greedy))
    monkeypatch.setattr(draft_training, "campaign_answers_folder",
                        lambda greedy=False: folders[int(greedy)][0])
    monkeypatch.setattr(draft_training, "campaign_features_folder",
                        lambda greedy=False: folders[int(greedy)][1])
    config = DraftTrainingConfig(layers=1, campaign=True, answers=3, greedy_answers=2, loss="tvd",
                                 stdlib_blocks=0, batch_size=2, max_steps=2, eval_every=2, eval_tokens=3)
    card = train_draft(chat_target, tmp_path / "work", tmp_path / "draft", config, log=lambda _: None,
                       head_token_ids=[3, 5, 7])
    sampled, greedy = load_campaign(*folders[0], 3), load_campaign(*folders[1], 2)
    assert card["answers"] == 3 + 2 and card["config"]["loss"] == "tvd"
    assert card["labelled_positions"] == sum(len(a.token_ids) - a.answer_start for a in sampled + greedy)
    labelled = sorted(p.name for p in (tmp_path / "work").glob("campaign*"))
    assert labelled == ["campaign", "campaign-greedy"]  # each campaign's labels in a folder of its own


def test_a_reduced_head_scores_the_answer_tokens_both_campaigns_favour(tmp_path):
    """Answers only (a prompt's tokens do not count), each campaign's counts as shares (a small campaign
    weighs as much as a large one), ties to the lower id."""
    def campaign_folder(name, answers):
        folder = tmp_path / name
        folder.mkdir()
        save_answers([Answer(torch.tensor([5, 5, 5, 5] + answer), 4, "code") for answer in answers],
                     folder / "answers-0000.safetensors", {})
        return folder

    large = campaign_folder("large", [[7, 7, 7, 7, 7, 8, 8], [8, 8, 9]])  # shares 7: .5, 8: .4, 9: .1
    small = campaign_folder("small", [[3, 4], [4, 3]])  # 3: .5, 4: .5
    assert frequent_answer_tokens(3, 16, (large, small)) == [3, 4, 7]  # a three-way tie at .5
    assert frequent_answer_tokens(2, 16, (large, small)) == [3, 4]  # counted raw: 7 (5 times), 8 (4)
    assert frequent_answer_tokens(5, 16, (large, small)) == [3, 4, 7, 8, 9]  # never the prompts' 5
    assert frequent_answer_tokens(2, 16, (large,)) == [7, 8]


@pytest.mark.slow
def test_the_shipped_draft_scores_the_tokens_the_kept_campaigns_favour():
    """assets/draft/draft_head_tokens.json is what scripts/draft_head_tokens.py writes from the answers
    kept with the project (a campaign that grows fails this until the script has run again)."""
    shipped = json.loads((SHIPPED_DRAFT / HEAD_TOKENS_FILE).read_text())
    assert shipped == frequent_answer_tokens(len(shipped), 49152)


def test_answers_is_a_campaign_setting():
    with pytest.raises(SpecDecError, match="--campaign"):
        HeadTrainingConfig(answers=100)
    with pytest.raises(SpecDecError, match="--campaign"):
        HeadTrainingConfig(greedy=True)
    with pytest.raises(SpecDecError, match="--campaign"):
        DraftTrainingConfig(greedy=True)
    with pytest.raises(SpecDecError, match="--campaign"):
        DraftTrainingConfig(answers=100)
    with pytest.raises(SpecDecError, match="not both"):
        HeadTrainingConfig(start_from_head=True, start_from_draft=True)
    with pytest.raises(SpecDecError, match="with --start-from-head"):
        HeadTrainingConfig(start_head_folder="some/head")
    assert HeadTrainingConfig(campaign=True, answers=100).answers == 100


@pytest.mark.slow  # reads the whole standard library, as a first run does
def test_the_kept_stdlib_passages_are_what_reading_the_library_gives(tmp_path, monkeypatch):
    from specdec.training import campaign_prompts

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    campaign_prompts.stdlib_passages.cache_clear()
    try:
        first = campaign_prompts.stdlib_passages()  # read, then kept
        assert len(list(tmp_path.glob("stdlib-passages-*.json"))) == 1
        campaign_prompts.stdlib_passages.cache_clear()
        assert campaign_prompts.stdlib_passages() == first  # from the kept file
        assert len(first[0]) > 1000 and len(first[1]) > 1000
        assert all(isinstance(text, str) and 150 <= len(text) <= 900 for text in first[0])  # docstrings
        assert all(isinstance(text, str) and 0 < len(text) <= 900 for text in first[1])  # blocks, stripped
    finally:
        campaign_prompts.stdlib_passages.cache_clear()
