"""Near-duplicate detection between task modules by normalised-AST similarity.

A task is compared by what it computes, not by how it is spelled: ``normalized_ast``
(``normalisation.py``) rewrites a module so that spelling no longer matters, and
``operator_names`` (``model_code.py``) reads which operators it calls. Both are importable from
here as well.

``similarity(a, b)`` is ``structure * (1 + operators) / 2``:

- ``structure``: the multiset Jaccard index of the token 3-grams of the two normalised token
  sequences (sum of the smaller counts over sum of the larger). It is symmetric by construction,
  1 exactly when the 3-gram multisets match (so for identical normalised ASTs), and with the
  multiset kept as a set of ``(gram, occurrence)`` pairs a pair costs one C-level set
  intersection (microseconds), where ``difflib``'s ratio costs milliseconds and is not
  symmetric.
- ``operators``: the Jaccard index of the two sets of operator names (``operator_names``: the
  lower-case bare names of torch calls and tensor-method calls in the model code, ``relu`` for
  ``torch.relu``, ``F.relu``, ``nn.ReLU`` and ``x.relu()`` alike; 1 when both are empty).
  KernelBench's level-1 problems are a few lines of boilerplate around one operator, so a pure
  sequence measure rates ReLU against LeakyReLU above 0.9 and would call every
  single-operator task a copy of every other. With the factor, modules with no operator in
  common score at most 0.5, and one operator swapped out of three at most 0.75: a different
  operator combination is a different problem, while structure still ranks the candidates.

Upper bound used to skip pairs: ``structure <= min(|A|, |B|) / max(|A|, |B|)`` for multisets of
sizes ``|A|`` and ``|B|``, and ``operators`` is cheap; a pair is only intersected when the bound
can still reach the threshold (or beat the best match so far, in ``nearest``).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cuda_agent.kernel_sandbox import Task

from .model_code import CONTRACT_NAMES, NOT_OPERATORS, operator_names, torch_call_names
from .normalisation import normalized_ast, normalized_source

__all__ = [
    "CONTRACT_NAMES",
    "NOT_OPERATORS",
    "Dropped",
    "Fingerprint",
    "SimilarityIndex",
    "decontaminate",
    "deduplicate",
    "fingerprint",
    "nearest",
    "normalized_ast",
    "normalized_source",
    "operator_names",
    "similarity",
    "torch_call_names",
]

_NGRAM = 3


@dataclass(frozen=True)
class Fingerprint:
    """What similarity compares, computed once per source: 3-gram multiset and operator set.

    ``grams`` holds one entry per 3-gram occurrence (``hash((gram, k))`` for the k-th), so
    the multiset Jaccard index is a plain set intersection.
    """

    grams: frozenset[int]
    operators: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.grams)


@functools.lru_cache(maxsize=8192)
def fingerprint(source: str) -> Fingerprint:
    """The ``Fingerprint`` of a module's source (cached by source text)."""
    tokens = normalized_ast(source)
    n = min(_NGRAM, len(tokens))
    seen: Counter[tuple[str, ...]] = Counter()
    grams: set[int] = set()
    for i in range(len(tokens) - n + 1):
        gram = tokens[i : i + n]
        grams.add(hash((gram, seen[gram])))
        seen[gram] += 1
    return Fingerprint(grams=frozenset(grams), operators=operator_names(source))


def _operator_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _upper_bound(a: Fingerprint, b: Fingerprint) -> float:
    """A cheap bound on ``similarity``: size ratio of the multisets times the operator term."""
    small, large = sorted((a.size, b.size))
    structure = 1.0 if large == 0 else small / large
    return structure * (1.0 + _operator_jaccard(a.operators, b.operators)) / 2.0


def _similarity(a: Fingerprint, b: Fingerprint) -> float:
    operators = _operator_jaccard(a.operators, b.operators)
    common = len(a.grams & b.grams)
    union = a.size + b.size - common
    structure = 1.0 if union == 0 else common / union
    return structure * (1.0 + operators) / 2.0


def _fingerprint_of(item: str | Task | Fingerprint) -> Fingerprint:
    if isinstance(item, Fingerprint):
        return item
    return fingerprint(item.source if isinstance(item, Task) else item)


def similarity(a: str | Task | Fingerprint, b: str | Task | Fingerprint) -> float:
    """Similarity in [0, 1] of two modules: ``structure * (1 + operators) / 2`` (module doc).

    1 for identical normalised ASTs, unchanged by renaming identifiers, symmetric.
    """
    return _similarity(_fingerprint_of(a), _fingerprint_of(b))


class SimilarityIndex:
    """Named fingerprints of a corpus (for example KernelBench), built once, queried often."""

    def __init__(self, items: Iterable[tuple[str, Fingerprint]]) -> None:
        self._items = tuple(items)

    @classmethod
    def build(cls, corpus: Iterable[Task] | Mapping[str, str]) -> SimilarityIndex:
        """Index tasks (or a name -> source mapping)."""
        if isinstance(corpus, Mapping):
            return cls((name, fingerprint(src)) for name, src in corpus.items())
        return cls((task.name, fingerprint(task.source)) for task in corpus)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, name: str, item: str | Task | Fingerprint) -> SimilarityIndex:
        """A new index with one more entry (this one is unchanged)."""
        return SimilarityIndex((*self._items, (name, _fingerprint_of(item))))

    def nearest(self, item: str | Task | Fingerprint) -> tuple[str | None, float]:
        """The most similar entry and its score; ``(None, 0.0)`` for an empty index.

        Entries are tried in decreasing order of the cheap bound (then index order) and the
        search stops once the bound cannot beat the best score; of equal scores the first
        tried wins.
        """
        query = _fingerprint_of(item)
        bounds = sorted(
            ((_upper_bound(query, fp), i) for i, (_, fp) in enumerate(self._items)),
            key=lambda pair: (-pair[0], pair[1]),
        )
        best_name: str | None = None
        best_score = -1.0
        for bound, i in bounds:
            if bound <= best_score:
                break  # sorted by bound: nothing left can beat the best
            name, fp = self._items[i]
            score = _similarity(query, fp)
            if score > best_score:
                best_name, best_score = name, score
        return best_name, max(best_score, 0.0)

    def first_above(
        self, item: str | Task | Fingerprint, threshold: float
    ) -> tuple[str, float] | None:
        """The first entry (in index order) whose similarity reaches ``threshold``, or ``None``."""
        query = _fingerprint_of(item)
        for name, fp in self._items:
            if _upper_bound(query, fp) >= threshold:
                score = _similarity(query, fp)
                if score >= threshold:
                    return name, score
        return None


def nearest(
    task_source: str | Task, corpus: SimilarityIndex | Iterable[Task] | Mapping[str, str]
) -> tuple[str | None, float]:
    """The corpus entry most similar to ``task_source`` and its score (``(None, 0.0)`` if empty).

    Pass a ``SimilarityIndex`` when querying one corpus many times.
    """
    index = corpus if isinstance(corpus, SimilarityIndex) else SimilarityIndex.build(corpus)
    return index.nearest(task_source)


@dataclass(frozen=True)
class Dropped:
    """A task left out by ``decontaminate`` or ``deduplicate``, with the match that caused it."""

    task: Task
    match: str
    score: float
    threshold: float

    @property
    def reason(self) -> str:
        return (
            f"{self.task.name!r} is {self.score:.3f} similar to {self.match!r} "
            f"(threshold {self.threshold})"
        )


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")


def decontaminate(
    tasks: Iterable[Task],
    against: SimilarityIndex | Iterable[Task] | Mapping[str, str],
    threshold: float = 0.9,
) -> tuple[list[Task], list[Dropped]]:
    """Split ``tasks`` into those below ``threshold`` similarity to every task of ``against``
    and those at or above it (each with its nearest match), keeping input order."""
    _check_threshold(threshold)
    index = against if isinstance(against, SimilarityIndex) else SimilarityIndex.build(against)
    kept: list[Task] = []
    dropped: list[Dropped] = []
    for task in tasks:
        name, score = index.nearest(task)
        if name is not None and score >= threshold:
            dropped.append(Dropped(task=task, match=name, score=score, threshold=threshold))
        else:
            kept.append(task)
    return kept, dropped


def deduplicate(tasks: Iterable[Task], threshold: float = 0.9) -> tuple[list[Task], list[Dropped]]:
    """Keep the first of each group of near-duplicates (similarity >= ``threshold``).

    A task is dropped when it is that similar to a task already kept, so the result does not
    depend on tasks that were themselves dropped.
    """
    _check_threshold(threshold)
    kept: list[Task] = []
    dropped: list[Dropped] = []
    index = SimilarityIndex(())
    for task in tasks:
        fp = fingerprint(task.source)
        hit = index.first_above(fp, threshold)
        if hit is None:
            kept.append(task)
            index = index.add(task.name, fp)
        else:
            dropped.append(Dropped(task=task, match=hit[0], score=hit[1], threshold=threshold))
    return kept, dropped
