"""Distil the ``smol`` draft model from its verifier, SmolLM2-135M-Instruct.

The command line: prepare the data, have the verifier write the targets (or
reuse them from ``--cache``), train, save the draft, measure it as the engines
run it, and write its stats file and model card. Every ``DistillConfig`` field
is a flag of the same name. With ``--eval-only`` it measures the draft already
in ``--out`` and refreshes the figures in its record.

    python -m distill --out engine/assets/smol-draft
    python -m distill --out engine/assets/smol-draft --eval-only
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from distill.card import STATS, dir_size, write_record
from distill.config import DistillConfig, torch_dtype
from distill.data import choose_vocabulary, split_prompts
from distill.evaluate import evaluate, exit_agreement, train_fit
from distill.teacher import cached_samples, generate_samples, load_verifier, teacher_targets
from distill.train import build_student, train
from engine.devices import cpu_name

log = logging.getLogger("distill")


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, DistillConfig]:
    defaults = DistillConfig()
    parser = argparse.ArgumentParser(prog="python -m distill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output model directory")
    parser.add_argument("--eval-only", action="store_true", help="measure the draft already in --out")
    parser.add_argument(
        "--probe-layers",
        action="store_true",
        help="also measure how often the verifier cut after k of its layers already makes its greedy token",
    )
    parser.add_argument(
        "--probe-train",
        action="store_true",
        help="also measure acceptance on as many training prompts as there are held-out ones",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="file to keep the generated targets in (reused when the settings match)",
    )
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    cfg = DistillConfig(**{name: getattr(args, name) for name in asdict(defaults)})
    for name in (cfg.teacher_dtype, cfg.train_dtype):
        torch_dtype(name)  # refuse a bad dtype name before any work
    return args, cfg


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def probes(args, out: Path, verifier, eval_samples, train_prompts, cfg: DistillConfig, eos_id: int, pad_id: int):
    """The extra measurements ``--probe-layers`` and ``--probe-train`` ask for, keyed as the stats file keeps them."""
    found = {}
    if args.probe_layers:
        found["layer_exit"] = exit_agreement(verifier, eval_samples)
    if args.probe_train:
        found["train_fit"] = train_fit(out, verifier, train_prompts[: cfg.eval_prompts], cfg, eos_id, pad_id)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args, cfg = parse_args(argv)
    wall_start = time.monotonic()
    deadline = wall_start + cfg.minutes * 60 - 240  # leave room for saving and evaluation
    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    verifier, tokenizer = load_verifier()
    eos_id, pad_id = verifier.config.eos_token_id, tokenizer.pad_token_id
    eval_prompts, train_prompts, real_pairs, data_info, text_counts = split_prompts(tokenizer, cfg)
    gen_cfg = {
        k: getattr(cfg, k)
        for k in ("seed", "eval_prompts", "max_prompt_tokens", "max_new_tokens", "gen_batch", "top_k")
    }
    eval_targets = cached_samples(
        args.cache.with_suffix(".eval.pt") if args.cache else None,
        {**gen_cfg, "part": "eval"},
        lambda: generate_samples(verifier, eval_prompts, cfg, eos_id, pad_id, "verifier answers (eval)"),
    )
    eval_samples = eval_targets.samples
    out: Path = args.out
    if args.eval_only:
        result = evaluate(out, verifier, eval_samples, cfg)
        result.update(probes(args, out, verifier, eval_samples, train_prompts, cfg, eos_id, pad_id))
        if (out / STATS).is_file():  # refresh the measured figures; the record of how it was trained stays
            write_record(out, {**json.loads((out / STATS).read_text()), **result})
        print(json.dumps(result, indent=1))
        return

    # training targets come from a low-precision copy (bfloat16 matmuls run ~2.5x faster on CPUs that have
    # them); the held-out answers above come from the float32 verifier the engines run
    teacher = load_verifier(torch_dtype(cfg.teacher_dtype))[0]
    train_targets = cached_samples(
        args.cache,
        {**gen_cfg, "train_prompts": cfg.train_prompts, "teacher_dtype": cfg.teacher_dtype, "part": "train"},
        lambda: generate_samples(teacher, train_prompts, cfg, eos_id, pad_id, "verifier answers (train)"),
    )
    real_targets = cached_samples(
        args.cache.with_suffix(".real.pt") if args.cache else None,
        {
            **gen_cfg,
            "train_prompts": cfg.train_prompts,
            "real_replies": cfg.real_replies,
            "max_real_tokens": cfg.max_real_tokens,
            "batch_tokens": cfg.batch_tokens,
            "teacher_dtype": cfg.teacher_dtype,
            "part": "real",
        },
        lambda: teacher_targets(teacher, real_pairs, cfg, pad_id),
    )
    teacher = None  # free it before training
    train_samples, real_samples = train_targets.samples, real_targets.samples
    data_info.update(
        real_replies=len(real_samples),
        real_reply_tokens=sum(len(s.answer_ids) for s in real_samples),
        real_prompt_tokens=sum(len(s.prompt_ids) for s in real_samples),
        real_teacher_seconds=round(real_targets.seconds, 1),
        train_prompts=len(train_samples),
        train_answer_tokens=sum(len(s.answer_ids) for s in train_samples),
        train_prompt_tokens=sum(len(s.prompt_ids) for s in train_samples),
        generation_seconds=round(train_targets.seconds, 1),
    )
    log.info("training data: %s", data_info)

    specials = [t for t in (eos_id, pad_id, *tokenizer.all_special_ids) if t is not None]
    vocab_index = choose_vocabulary(text_counts, train_samples, cfg.vocab_subset, specials)
    seed_everything(cfg.seed)
    student = build_student(verifier, cfg, vocab_index)
    train_info = train(student, train_samples + real_samples, cfg, pad_id, deadline)

    from engine.models.shared_draft import save_shared_draft

    partial = out.with_name(out.name + ".partial")  # a failed run never leaves a half-written draft behind
    shutil.rmtree(partial, ignore_errors=True)
    save_shared_draft(
        student,
        verifier,
        partial,
        {"distilled_from": "SmolLM2-135M-Instruct", "compute_dtype": cfg.train_dtype, "layers": cfg.layers},
    )
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    measured = evaluate(out, verifier, eval_samples, cfg)
    measured.update(probes(args, out, verifier, eval_samples, train_prompts, cfg, eos_id, pad_id))
    command = "python -m distill --out " + str(args.out)
    changed = [f"--{k.replace('_', '-')} {v}" for k, v in asdict(cfg).items() if v != getattr(DistillConfig(), k)]
    command = " ".join([command, *changed])
    # targets taken from the cache count with the time they took when they were made
    reused_seconds = sum(t.seconds for t in (eval_targets, train_targets, real_targets) if t.reused)
    stats = {
        "command": command,
        "out": str(args.out),
        "config": asdict(cfg),
        "data": data_info,
        "train": train_info,
        **measured,
        "wall_seconds": round(time.monotonic() - wall_start + reused_seconds, 1),
        "reused_seconds": round(reused_seconds, 1),
        "cpu": cpu_name(),
    }
    write_record(out, stats)
    log.info("wrote %s (%d bytes) in %.1f min", out, dir_size(out), stats["wall_seconds"] / 60)


if __name__ == "__main__":
    main()
