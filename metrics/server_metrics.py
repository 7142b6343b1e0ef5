"""A server's Prometheus ``/metrics`` page read as an engine snapshot, for the time series of an endpoint run.

``parse_server_metrics`` reads the series vLLM publishes (and PD-Verify's
server publishes under the same names) from the Prometheus text format:

* ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` – gauges;
* ``vllm:kv_cache_usage_perc`` – KV cache in use, 0..1 (older vLLM: ``vllm:gpu_cache_usage_perc``);
* ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total`` – cumulative counters, so a window's
  acceptance rate is Δaccepted / Δdraft tokens and its mean acceptance length
  1 + Δaccepted / Δdrafts (vLLM's definitions, the bonus token included);
* ``pdverify:draft_length`` – PD-Verify's current draft length, when present;
* ``pdverify:suffix_tree_size`` – what PD-Verify's global suffix tree holds, one
  sample per ``unit`` (tokens, sequences, nodes), when the server drafts with it.

Series are summed over their label sets (one server may publish several
models or engines). A series the page lacks is ``None``: a server without
speculative decoding has no acceptance, and one without a KV gauge has no
KV usage. Nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from engine.suffix_tree import TreeSize

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # current name first
DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
DRAFT_LENGTH = "pdverify:draft_length"
SUFFIX_TREE = "pdverify:suffix_tree_size"  # labelled by unit: its samples are three sizes, never summed together


@dataclass(frozen=True)
class ServerMetrics:
    """What one scrape said; ``None`` where the page has no such series."""

    running: int | None
    waiting: int | None
    kv_cache_usage: float | None  # 0..1
    drafts: int | None  # cumulative verify steps that drafted
    draft_tokens: int | None  # cumulative
    accepted_tokens: int | None  # cumulative
    draft_len: int | None
    suffix_tree: TreeSize | None = None  # None unless the page has all three of the tree's units


def parse_server_metrics(text: str) -> ServerMetrics:
    """The series above from a ``/metrics`` page; ``ValueError`` if it is not Prometheus text."""
    totals: dict[str, float] = {}
    tree: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == SUFFIX_TREE:
                unit = sample.labels.get("unit", "")
                tree[unit] = tree.get(unit, 0.0) + sample.value
                continue
            # a counter's samples are NAME_total, whether or not its TYPE line names the family without it
            name = sample.name.removesuffix("_total")
            totals[name] = totals.get(name, 0.0) + sample.value

    def whole(name: str) -> int | None:
        return round(totals[name]) if name in totals else None

    kv = next((totals[name] for name in KV_USAGE if name in totals), None)
    whole_tree = set(TreeSize._fields) <= set(tree)
    return ServerMetrics(
        running=whole(RUNNING),
        waiting=whole(WAITING),
        kv_cache_usage=kv,
        drafts=whole(DRAFTS),
        draft_tokens=whole(DRAFT_TOKENS),
        accepted_tokens=whole(ACCEPTED_TOKENS),
        draft_len=whole(DRAFT_LENGTH),
        suffix_tree=TreeSize(*(round(tree[u]) for u in TreeSize._fields)) if whole_tree else None,
    )
