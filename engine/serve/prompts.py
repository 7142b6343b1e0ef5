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
    for i, message in enumerate(messages):
        _check_unicode(message.text, f"messages.{i}.content")
    if not tokenizer.chat_template:
        return _encoded(tokenizer, "\n".join(m.text for m in messages), "messages")
    conversation = [{"role": m.role, "content": m.text} for m in messages]
    try:
        return encode_conversation(tokenizer, conversation)
    except Exception as exc:  # a template may refuse a conversation (e.g. roles out of order)
        raise APIError(400, f"the chat template refused these messages: {exc}", param="messages") from exc


def completion_prompt_ids(tokenizer: PreTrainedTokenizerBase, prompt: str | list[str] | list[int]) -> list[int]:
    if isinstance(prompt, str):
        return _encoded(tokenizer, prompt, "prompt")
    if all(isinstance(p, str) for p in prompt) and prompt:
        if len(prompt) != 1:
            raise APIError(400, "one prompt per request: batches of prompts are not supported", param="prompt")
        return _encoded(tokenizer, prompt[0], "prompt")
    return list(prompt)


def _encoded(tokenizer: PreTrainedTokenizerBase, text: str, param: str) -> list[int]:
    """``text``'s token ids as sent; any error the tokenizer raises comes from the client's text, so is a 400."""
    _check_unicode(text, param)
    try:
        return encode_prompt(tokenizer, text, raw=True)
    except Exception as exc:
        raise APIError(400, f"the {param} could not be tokenized: {type(exc).__name__}: {exc}", param=param) from exc


def _check_unicode(text: str, param: str) -> None:
    """Refuse a lone surrogate (``"\\ud800"``): valid in JSON, but no Unicode text (the tokenizer raises on it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"at character {exc.start}"
        raise APIError(400, f"{param} holds a lone surrogate {where}, which is not Unicode text", param=param) from exc
