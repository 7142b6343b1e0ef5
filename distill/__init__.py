"""Distil the ``smol`` draft model from its verifier, SmolLM2-135M-Instruct.

Speculative decoding only pays off when the draft guesses what the verifier
would say, on the text the verifier actually produces. So the training data is
the verifier's own greedy answers to ShareGPT prompts (formatted with its chat
template), and the targets are its next-token distributions at every answer
position. Both come out of one batched generation pass: the logits of each
decoding step are exactly the teacher distribution for that position, so no
separate teacher forward is needed. Only the top-k of each distribution is
kept, which makes the targets small enough to train on them for several epochs.
Teacher-forced passes over real ShareGPT replies add broader (cheaper) targets.
A bfloat16 copy of the verifier writes all training targets and the student
trains under bfloat16 autocast: on CPUs with bfloat16 dot products (AVX-512
BF16, AMX) that is much faster than float32. The held-out answers it is scored
on come from the float32 verifier, as the engines run it.

The student is a shared-embedding draft (``engine.models.shared_draft``):
copies of a few verifier layers (``--layers``, first and last ones by default)
that read the verifier's own input embedding and propose through an output
layer made of the verifier's embedding rows for the most frequent
``--vocab-subset`` tokens, which keeps it small on disk and cheap to run.
Starting from real layers instead of random ones is what lets a few
CPU-minutes of training get anywhere. Only the layers and the final norm train.

The token loss is KL(teacher || student) over the teacher's top-k tokens plus
a cross-entropy term on the greedy token, because greedy acceptance only
depends on the argmax agreeing.

At the end the saved (bfloat16) weights are reloaded in the dtype they trained in,
as the engines run them, and the greedy acceptance
rate at draft length L is measured on held-out prompts, together with the
per-token forward time of both models; the figures go into the model card.

One module a step: ``config`` (the recipe), ``data`` (prompts, replies and the
draft's vocabulary, read by ``workloads.datasets``), ``teacher`` (the verifier's
answers and top-k targets), ``train`` (the student and its loss), ``evaluate``
(acceptance and forward times of the saved draft), ``card`` (the stats file
and the model card) and ``__main__`` (the command line). This is an offline
support package beside the runtime: it uses the engine's model code, and the
engines never import it.

    python -m distill --out engine/assets/smol-draft
    python -m distill --out engine/assets/smol-draft --eval-only
"""
