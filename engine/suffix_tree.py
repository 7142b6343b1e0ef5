"""A bounded suffix tree over whole token sequences: the global memory of suffix drafting.

Data structure. A compressed trie of every suffix of every stored sequence,
each suffix cut at ``depth`` tokens (SuffixDecoding's depth-bounded suffix
tree, Oliaro et al. 2024). A node stands for the token string spelled on the
path from the root to it; the edge into it carries the tokens of that path's
last stretch (``label``, a tuple), and children are keyed by the first token
of their label. ``count`` is how often the node's string occurs in the stored
sequences – the number of stored (cut) suffixes that begin with it. Every
position inside one edge occurs as often as the node at its end (otherwise it
would be a node), which is why an insert that diverges or ends inside an edge
splits it there. Counts only shrink down a path, and a child's count over its
parent's is how often the parent's string goes on with the child's tokens.

* ``add`` inserts each of a sequence's suffixes (``n · depth`` token steps at
  most), adding 1 to every position on its path.
* ``remove`` walks the same paths subtracting 1, drops nodes that reach 0 and
  merges a node with its only child when both count the same, so the tree stays
  compressed: at most two nodes per stored suffix.
* Bounded memory: sequences are stored in arrival order, and while more than
  ``max_tokens`` tokens are stored the oldest sequence is removed (evicted).
  ``size`` says how many tokens, sequences and nodes it holds.
* ``propose`` matches the longest suffix of a context (at most ``max_match``
  tokens) against the tree, then follows the most frequent continuation while
  its estimated probability (the product of child-over-parent counts along the
  way) stays at least ``min_prob`` and it occurred at least ``min_count`` times.

Not thread-safe: the caller serialises access (``engine.suffix`` holds a lock).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple


class TreeSize(NamedTuple):
    """What a tree holds: tokens stored, sequences stored, nodes (the root not counted)."""

    tokens: int
    sequences: int
    nodes: int


class Continuation(NamedTuple):
    """A proposal from the tree: tokens, each with its estimated probability, and the match behind it."""

    tokens: list[int]  # [] when the context's suffix is unknown or nothing clears the thresholds
    probs: list[float]  # [len(tokens)] non-increasing: count ratios multiplied along the path
    match: int  # tokens of the context's suffix found in the tree (0: none)

    @property
    def score(self) -> float:
        """Expected accepted tokens if the estimates were right: what ranks two proposals."""
        return sum(self.probs)


NO_CONTINUATION = Continuation([], [], 0)


class _Node:
    __slots__ = ("children", "count", "label")

    def __init__(self, label: tuple[int, ...], count: int) -> None:
        self.label = label
        self.count = count
        self.children: dict[int, _Node] = {}


@dataclass(frozen=True)
class Location:
    """A position in the tree: ``offset`` tokens into the label of ``node`` (1..len(label)); root: offset 0."""

    node: _Node
    offset: int


class SuffixTree:
    def __init__(self, depth: int = 24, max_tokens: int = 65_536) -> None:
        if depth < 2:
            raise ValueError(f"suffix tree depth must be >= 2 (a match and a continuation), got {depth}")
        if max_tokens < 1:
            raise ValueError(f"suffix tree capacity must be >= 1 token, got {max_tokens}")
        self.depth = depth
        self.max_tokens = max_tokens
        self._root = _Node((), 0)
        self._sequences: OrderedDict[int, tuple[int, ...]] = OrderedDict()  # arrival order: the oldest first
        self._next_id = 0
        self._tokens = 0
        self._nodes = 0

    # ---------------------------------------------------------------- size
    def size(self) -> TreeSize:
        return TreeSize(self._tokens, len(self._sequences), self._nodes)

    # -------------------------------------------------------------- update
    def add(self, tokens: Sequence[int]) -> int:
        """Store ``tokens`` (the last ``max_tokens`` of them), evicting the oldest sequences beyond the bound.

        Returns the sequence's id (for ``remove``). Mutates: the tree.
        """
        seq = tuple(tokens[-self.max_tokens :])
        while self._sequences and self._tokens + len(seq) > self.max_tokens:
            self.remove(next(iter(self._sequences)))
        seq_id, self._next_id = self._next_id, self._next_id + 1
        self._sequences[seq_id] = seq
        self._tokens += len(seq)
        for start in range(len(seq)):
            self._insert(seq[start : start + self.depth])
        return seq_id

    def remove(self, seq_id: int) -> None:
        """Forget the sequence ``seq_id`` stored: every count it added is taken back. Mutates: the tree."""
        seq = self._sequences.pop(seq_id)
        self._tokens -= len(seq)
        for start in range(len(seq)):
            self._delete(seq[start : start + self.depth])

    def clear(self) -> None:
        """Forget everything. Mutates: the tree."""
        self._root = _Node((), 0)
        self._sequences.clear()
        self._tokens = self._nodes = 0

    def _insert(self, s: tuple[int, ...]) -> None:
        """Add 1 to the count of every position on the path of ``s``, creating or splitting nodes as needed."""
        node, i = self._root, 0
        while i < len(s):
            child = node.children.get(s[i])
            if child is None:
                node.children[s[i]] = _Node(s[i:], 1)
                self._nodes += 1
                return
            label = child.label
            j, limit = 1, min(len(label), len(s) - i)
            while j < limit and label[j] == s[i + j]:
                j += 1
            if j < len(label):  # s diverges from the edge or ends inside it: the edge's counts now differ
                child = self._split(node, child, j)
            child.count += 1
            node, i = child, i + j

    def _split(self, parent: _Node, child: _Node, at: int) -> _Node:
        """Cut the edge into ``child`` after ``at`` tokens; returns the new middle node."""
        middle = _Node(child.label[:at], child.count)
        child.label = child.label[at:]
        middle.children[child.label[0]] = child
        parent.children[middle.label[0]] = middle
        self._nodes += 1
        return middle

    def _delete(self, s: tuple[int, ...]) -> None:
        """Take 1 from every position on the path of ``s`` (stored before), dropping and merging nodes."""
        path: list[tuple[_Node, _Node]] = []
        node, i = self._root, 0
        while i < len(s):
            child = node.children[s[i]]
            # a stored suffix always ends on a node: its own end makes that position count more than what follows
            assert child.label == s[i : i + len(child.label)], "suffix tree: removing a suffix it does not hold"
            child.count -= 1
            path.append((node, child))
            node, i = child, i + len(child.label)
        for parent, child in reversed(path):
            if child.count == 0:  # its children were on this path and are gone already
                del parent.children[child.label[0]]
                self._nodes -= 1
            elif len(child.children) == 1:
                (only,) = child.children.values()
                if only.count == child.count:  # nothing ends or branches here any more
                    child.label += only.label
                    child.children = only.children
                    self._nodes -= 1

    # --------------------------------------------------------------- query
    def find(self, pattern: Sequence[int]) -> Location | None:
        """Where ``pattern``'s path ends, or ``None`` when it does not occur."""
        node, offset = self._root, 0
        for token in pattern:
            if offset < len(node.label):
                if node.label[offset] != token:
                    return None
                offset += 1
            else:
                child = node.children.get(token)
                if child is None:
                    return None
                node, offset = child, 1
        return Location(node, offset)

    def count(self, pattern: Sequence[int]) -> int:
        """How often ``pattern`` occurs in the stored sequences (within ``depth`` tokens)."""
        found = self.find(pattern)
        return 0 if found is None else found.node.count if found.offset else 0

    def propose(
        self, context: Sequence[int], max_match: int, budget: Callable[[int], int], min_prob: float, min_count: int = 1
    ) -> Continuation:
        """The most frequent continuation of the longest suffix of ``context`` the tree holds.

        Suffixes of ``max_match`` tokens down to 1 are tried (fewer than ``depth``, so that a continuation
        fits); at most ``budget(match)`` tokens are proposed. Thresholds: see the module docstring.
        """
        for m in range(min(max_match, len(context), self.depth - 1), 0, -1):
            found = self.find(context[len(context) - m :])
            if found is not None:
                return self._follow(found, m, budget(m), min_prob, min_count)
        return NO_CONTINUATION

    def _follow(self, at: Location, match: int, budget: int, min_prob: float, min_count: int) -> Continuation:
        node, offset = at.node, at.offset
        tokens: list[int] = []
        probs: list[float] = []
        prob = 1.0
        if node.count < min_count:
            return Continuation([], [], match)
        while len(tokens) < budget:
            if offset < len(node.label):  # inside an edge every occurrence goes on the same way
                token = node.label[offset]
                offset += 1
            else:
                if not node.children:
                    break
                child = max(node.children.values(), key=lambda c: c.count)
                prob *= child.count / node.count
                if prob < min_prob or child.count < min_count:
                    break
                node, offset, token = child, 1, child.label[0]
            tokens.append(token)
            probs.append(prob)
        return Continuation(tokens, probs, match)
