"""The pieces of the draft-distillation recipe that decide what the draft learns and how it is scored."""

import json
from collections import Counter
from dataclasses import asdict

import pytest
import torch

from distill.__main__ import parse_args
from distill.card import CARD, STATS, write_record
from distill.config import DistillConfig, Sample, torch_dtype
from distill.data import choose_vocabulary
from distill.evaluate import acceptance, block_acceptance, exit_agreement
from distill.teacher import generate_samples
from distill.train import autocast, build_student, distill_loss, train
from engine.models.tiny import tiny_models
from tests.support import ROOT as ROOT_DIR

COMMITTED = ROOT_DIR / "engine" / "assets" / "smol-draft"


def sample(answer: list[int]) -> Sample:
    n = len(answer)
    return Sample(
        prompt_ids=torch.tensor([1, 2]),
        answer_ids=torch.tensor(answer),
        topk_ids=torch.zeros(n, 2, dtype=torch.int32),
        topk_logp=torch.zeros(n, 2, dtype=torch.float16),
    )


def test_vocabulary_takes_frequent_text_tokens_answers_first_and_always_the_kept_ones():
    text = Counter({10: 100, 11: 90, 12: 80, 13: 70})
    answers = [sample([40] * 10 + [41] * 6)]  # each answer token weighs ANSWER_WEIGHT text tokens
    chosen = choose_vocabulary(text, answers, size=4, keep=[2]).tolist()
    assert chosen == sorted(chosen) and len(chosen) == 4
    assert 2 in chosen and 40 in chosen and 41 in chosen and 10 in chosen
    assert 11 not in chosen and 13 not in chosen


def test_loss_is_smallest_when_the_student_matches_the_teacher():
    teacher = torch.tensor([[0.7, 0.2, 0.1, 0.0]]).clamp_min(1e-9).log()
    top_logp, top_ids = teacher.topk(3, dim=-1)
    matched, kl_matched = distill_loss(teacher, top_ids, top_logp.half(), ce_weight=0.0)
    assert kl_matched.item() == pytest.approx(0.0, abs=1e-3)
    wrong = torch.tensor([[-5.0, 0.0, 5.0, 0.0]])
    worse, _ = distill_loss(wrong, top_ids, top_logp.half(), ce_weight=0.5)
    assert worse.item() > matched.item() + 1


def test_tokens_outside_the_subset_are_skipped_not_counted():
    logits = torch.zeros(1, 4)
    ids = torch.tensor([[-1, 2]])  # the teacher's greedy token is not proposable
    logp = torch.tensor([[-0.1, -2.5]]).half()
    loss, _ = distill_loss(logits, ids, logp, ce_weight=1.0)
    only_second = torch.exp(torch.tensor(-2.5)) * (-2.5 - torch.log(torch.tensor(0.25)))
    assert loss.item() == pytest.approx(only_second.item(), rel=1e-2)


@pytest.mark.parametrize(
    ("matches", "expected"),
    [
        # answer token 0 comes from prefill; then a full block of 4, the verifier's bonus token, the last 2
        ([[True] * 8] * 4, (6, 6, 0)),
        ([[False] * 5] * 4, (0, 10, 4)),  # every block is rejected at once and the verifier adds one token
        ([[True, True, False, True, True, True, True, True]] * 4, (5, 8, 1)),
        # the second proposal of the first block (token 2) misses, though token 2 is right at depth 1
        ([[True] * 8, [True, True, False, True, True, True, True, True], [True] * 8, [True] * 8], (5, 8, 1)),
    ],
)
def test_block_acceptance_replays_greedy_speculation(matches, expected):
    assert block_acceptance(matches, 4) == expected


def test_block_acceptance_with_the_gate_stops_each_block_before_its_first_unsure_proposal():
    matches = [[True] * 8] * 4
    sure = [[True] * 8, [True, True, False, True, True, True, True, True], [True] * 8, [True] * 8]
    # block 1 proposes token 1 only (its proposal 2, at token 2, is unsure) and the verifier adds token 2;
    # block 2 proposes tokens 3..6 and the verifier adds token 7; a block the gate cut short is not a rejection
    assert block_acceptance(matches, 4, sure) == (5, 5, 0)
    never = [[False] * 8] * 4
    assert block_acceptance(matches, 4, never) == (0, 0, 0)  # every step is the verifier's own token


def test_every_config_field_is_a_flag_and_the_defaults_are_the_committed_recipe():
    args, cfg = parse_args(["--out", "x", "--layers", "0,29", "--lr", "0.01", "--vocab-subset", "1024"])
    assert cfg.layers == "0,29" and cfg.lr == 0.01 and cfg.vocab_subset == 1024
    assert parse_args(["--out", "x"])[1] == DistillConfig()
    committed = json.loads((COMMITTED / STATS).read_text())["config"]
    assert committed == asdict(DistillConfig())


@pytest.mark.parametrize("name", ["float33", "int8", "Tensor"])
def test_a_dtype_that_is_not_a_floating_point_torch_dtype_is_refused_by_name(name):
    with pytest.raises(SystemExit, match=name):
        torch_dtype(name)


def test_training_autocast_lowers_matmuls_only_when_asked():
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    with autocast("bfloat16"):
        assert (a @ b).dtype == torch.bfloat16
    with autocast("float32"):
        assert (a @ b).dtype == torch.float32


def test_the_card_states_the_measured_figures_and_its_own_directory_size(tmp_path):
    stats = json.loads((COMMITTED / STATS).read_text())
    stats["eval"] = {**stats["eval"], "acceptance_rate": 0.4321, "accepted": 4321, "drafted": 10000}
    stats["eval"].update(rejected=1679, per_token_acceptance=0.7201)
    stats["layer_exit"] = {"answer_tokens": 1234, "top1_agreement": [0.01 * k for k in range(1, 31)]}
    stats["train_fit"] = {"eval_prompts": 48, "eval_answer_tokens": 5000, "acceptance_rate": 0.3659, "accepted": 1500,
                          "drafted": 4100, "per_token_acceptance": 0.6476, "top1_agreement": 0.658}  # fmt: skip
    stats["eval"]["gated"] = [{"draft_confidence": 0.3, "acceptance_rate": 0.6543, "accepted": 6543, "proposed": 10000}]
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    write_record(tmp_path, stats)
    card = (tmp_path / "README.md").read_text()
    assert "**0.432**" in card and "4,321 of 10,000 drafted tokens" in card
    assert "τ = 0.3: 0.654 (6,543 of 10,000)" in card
    assert "(Leviathan et al.'s α): 0.720 (4,321 of 6,000)" in card
    assert "1,234 held-out answer positions, for k = 5: 0.050, 10: 0.100," in card
    assert "25: 0.250, 26: 0.260, 27: 0.270, 28: 0.280, 29: 0.290. Measured" in card
    assert "On 48 of its own training prompts (5,000 answer tokens" in card
    assert "acceptance 0.366 (1,500 of 4,100), per-token acceptance 0.648 and top-1 agreement 0.658" in card
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert f"| directory size | {size:,} bytes" in card
    assert f"| `README.md` | {(tmp_path / 'README.md').stat().st_size:,} |" in card
    assert json.loads((tmp_path / STATS).read_text())["eval"]["accepted"] == 4321


def test_the_committed_card_and_stats_are_what_the_writer_makes_of_the_committed_stats(tmp_path):
    for path in COMMITTED.iterdir():
        with open(tmp_path / path.name, "wb") as copy:  # same sizes, for the card's file table
            copy.truncate(path.stat().st_size)
    write_record(tmp_path, json.loads((COMMITTED / STATS).read_text()))
    for name in (CARD, STATS):
        assert (tmp_path / name).read_text() == (COMMITTED / name).read_text()


def test_training_teaches_the_draft_the_verifiers_next_token():
    verifier = tiny_models()[1].float().eval()
    cfg = DistillConfig(
        layers="0",
        max_new_tokens=24,
        gen_batch=8,
        top_k=8,
        epochs=30,
        batch_tokens=256,
        warmup_steps=2,
        lr=1e-2,
        train_dtype="float32",
    )
    prompts = [torch.randint(0, 256, (6,), generator=torch.Generator().manual_seed(i)).tolist() for i in range(16)]
    samples = generate_samples(verifier, prompts, cfg, eos_id=256, pad_id=256, desc="test")
    torch.manual_seed(0)
    student = build_student(verifier, cfg, torch.arange(257))
    before = acceptance(student, samples, cfg.draft_len)
    info = train(student, samples, cfg, pad_id=256, deadline=float("inf"))
    assert info["steps"] == info["planned_steps"] and not info["stopped_early"]
    after = acceptance(student, samples, cfg.draft_len)
    assert after["top1_agreement"] > before["top1_agreement"] + 0.1
    assert after["acceptance_rate"] > before["acceptance_rate"]


def test_the_verifier_cut_after_all_of_its_layers_makes_its_own_greedy_answer():
    verifier = tiny_models()[1].float().eval()
    cfg = DistillConfig(max_new_tokens=8, gen_batch=4, top_k=3)
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [40, 41]]
    samples = generate_samples(verifier, prompts, cfg, eos_id=256, pad_id=256, desc="test")
    with torch.inference_mode():
        probe = exit_agreement(verifier, samples)
    agreement = probe["top1_agreement"]
    assert probe["answer_tokens"] == sum(len(s.answer_ids) for s in samples)
    assert len(agreement) == verifier.config.num_hidden_layers
    assert agreement[-1] == 1.0  # the whole stack is the verifier, whose greedy answer the samples hold
    assert all(0.0 <= a <= 1.0 for a in agreement)


def test_per_token_acceptance_counts_only_proposals_the_verifier_judged():
    class Oracle:
        """A token-reading draft whose teacher-forced greedy proposals match on a fixed pattern."""

        def __init__(self, pattern):
            self.pattern = pattern

        def __call__(self, input_ids):
            n = input_ids.shape[1]
            nxt = torch.cat([input_ids[0, 1:], input_ids.new_zeros(1)])
            logits = torch.full((1, n, 300), -10.0)
            for i in range(n):
                right = self.pattern[i] if i < len(self.pattern) else True
                logits[0, i, int(nxt[i]) if right else 299] = 10.0
            return type("Out", (), {"logits": logits})()

    answer = torch.arange(10, 19)  # 9 answer tokens after a 1-token prompt
    sample = Sample(torch.tensor([3]), answer, torch.zeros(9, 1, dtype=torch.int32), torch.zeros(9, 1))
    # position i predicts answer token i; token 2 and token 6 miss
    pattern = [True, True, False, True, True, True, False, True, True, True]
    result = acceptance(Oracle(pattern), [sample], draft_len=4)
    # block 1 at token 1: token 1 right, token 2 wrong -> 1 accepted, rejected; the verifier makes token 2
    # block 2 at token 3: tokens 3, 4, 5 right, 6 wrong -> 3 accepted, rejected; the verifier makes token 6
    # block 3 at token 7: tokens 7, 8 (the last two) right -> 2 accepted
    assert (result["accepted"], result["drafted"], result["rejected"]) == (6, 10, 2)
    assert result["per_token_acceptance"] == 0.75
