"""Token ids to text piece by piece: the pieces join to the whole decode; stop strings cut exactly."""

import random

import pytest

from engine.models.tiny import tiny_tokenizer
from engine.serve.text import REPLACEMENT, Detokenizer, StopStrings, read_tokens


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def _decode(tokenizer):
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


def _ids(tokenizer, data: bytes) -> list[int]:
    """Byte-level ids of raw bytes (valid UTF-8 or not)."""
    alphabet = {b: tokenizer.convert_tokens_to_ids(ch) for b, ch in zip(range(256), _byte_chars(), strict=True)}
    return [alphabet[b] for b in data]


def _byte_chars() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    table = bytes_to_unicode()
    return [table[b] for b in range(256)]


def test_a_multibyte_character_split_across_steps_is_held_until_complete(tokenizer):
    ids = _ids(tokenizer, "a€b".encode())  # € is three bytes
    detok = Detokenizer(_decode(tokenizer))
    pieces = [detok.add(ids[:1]), detok.add(ids[1:3]), detok.add(ids[3:]), detok.flush()]
    assert pieces == ["a", "", "€b", ""]


def test_pieces_join_to_the_whole_decode_for_any_bytes_and_any_step_sizes(tokenizer):
    rng = random.Random(7)
    decode = _decode(tokenizer)
    for _ in range(200):
        ids = [rng.randrange(257) for _ in range(rng.randrange(1, 40))]  # 256 = <eos>, skipped
        detok, out, i = Detokenizer(decode), [], 0
        while i < len(ids):
            step = rng.randrange(1, 6)  # a speculative step emits one to five tokens
            out.append(detok.add(ids[i : i + step]))
            i += step
        out.append(detok.flush())
        assert "".join(out) == decode(ids)


def test_an_incomplete_character_at_the_end_is_flushed_as_the_decoder_shows_it(tokenizer):
    ids = _ids(tokenizer, b"ok\xe2\x82")
    detok = Detokenizer(_decode(tokenizer))
    assert detok.add(ids[:2]) == "ok"
    assert detok.add(ids[2:]) == ""
    assert detok.flush() == REPLACEMENT


def test_a_stop_string_cuts_the_text_before_it_even_across_pieces():
    stops = StopStrings(("STOP", "\n\n"))
    sent = []
    for piece in ["Hello ", "wor", "ld S", "TO", "P and more"]:
        text, stopped = stops.feed(piece)
        sent.append(text)
        if stopped:
            break
    assert "".join(sent) == "Hello world " and stopped


def test_text_that_only_looks_like_a_stop_string_start_is_released():
    stops = StopStrings(("STOP",))
    assert stops.feed("abcST") == ("ab", False)  # "cST" might begin "STOP"
    assert stops.feed("ART") == ("cST", False)
    assert stops.feed("", final=True) == ("ART", False)


def test_the_earliest_of_several_stop_strings_wins():
    assert StopStrings(("lo", "hel")).feed("say hello") == ("say ", True)


def test_without_stop_strings_nothing_is_held_back():
    stops = StopStrings(())
    assert stops.feed("abc") == ("abc", False)
    assert stops.feed("") == ("", False)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 100])
def test_a_stop_string_ends_the_count_at_its_token_however_tokens_are_grouped(tokenizer, block):
    # "Hello, world. Bye" in byte-level ids; the stop ". " completes at the 14th token whatever the grouping
    ids = _ids(tokenizer, b"Hello, world. Bye")
    detokenizer, stops = Detokenizer(_decode(tokenizer)), StopStrings((". ",))
    texts, tokens = [], 0
    for start in range(0, len(ids), block):
        chunk = ids[start : start + block]
        read = read_tokens(detokenizer, stops, chunk, finished=start + block >= len(ids))
        texts.append(read.text)
        tokens += read.tokens
        if read.stopped:
            break
    assert read.stopped and "".join(texts) == "Hello, world" and tokens == 14


@pytest.mark.parametrize("block", [1, 3, 100])
def test_without_a_stop_every_token_is_counted_and_the_text_is_whole(tokenizer, block):
    ids = _ids(tokenizer, "caf\u00e9 \u2603 done".encode())
    detokenizer, stops = Detokenizer(_decode(tokenizer)), StopStrings(("never",))
    texts, tokens = [], 0
    for start in range(0, len(ids), block):
        read = read_tokens(detokenizer, stops, ids[start : start + block], finished=start + block >= len(ids))
        texts.append(read.text)
        tokens += read.tokens
    assert not read.stopped and "".join(texts) == "caf\u00e9 \u2603 done" and tokens == len(ids)
