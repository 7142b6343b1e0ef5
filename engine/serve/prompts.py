"""Prompts and chat messages to the token ids the verifier sees.

Chat messages go through the verifier tokenizer's chat template with a
generation prompt, tokenized as ``engine.models.pair.encode_prompt`` does, so
one user message gives exactly the ids of ``python -m engine generate
--prompt``. A tokenizer without a chat template (the ``tiny`` preset) gets the
messages' texts joined by newlines, sent as is: again what ``generate`` sends
for one message. Completion prompts are sent as is (text), or taken as
token ids.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from engine.models.pair import encode_conversation, encode_prompt
from engine.serve.errors import APIError
from engine.serve.protocol import ChatMessage


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: list[ChatMessage]) -> list[int]:
    if not messages:
        raise APIError(400, "messages must not be empty", param="messages")
    if not tokenizer.chat_template:
        return encode_prompt(tokenizer, "\n".join(m.text for m in messages), raw=True)
    conversation = [{"role": m.role, "content": m.text} for m in messages]
    try:
        return encode_conversation(tokenizer, conversation)
    except Exception as exc:  # a template may refuse a conversation (e.g. roles out of order)
        raise APIError(400, f"the chat template refused these messages: {exc}", param="messages") from exc


def completion_prompt_ids(tokenizer: PreTrainedTokenizerBase, prompt: str | list[str] | list[int]) -> list[int]:
    if isinstance(prompt, str):
        return encode_prompt(tokenizer, prompt, raw=True)
    if all(isinstance(p, str) for p in prompt) and prompt:
        if len(prompt) != 1:
            raise APIError(400, "one prompt per request: batches of prompts are not supported", param="prompt")
        return encode_prompt(tokenizer, prompt[0], raw=True)
    return list(prompt)
