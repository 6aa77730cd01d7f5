"""Domain sequences for continual test-time graph adaptation (generated or shipped data).

Two sequences, each a source domain (index 0, split 60/20/20 into train /
validation / test nodes) followed by unlabelled target domains that drift
further and further from it:

* :func:`csbm_sequence` -- a contextual stochastic block model (the
  CPU-scale setting of our EMC protocol, ``docs/emc.md``): Gaussian
  features around class means that rotate by ``rotation_deg * t`` in a
  fixed random plane and shift by ``offset * t * u``; the within-class edge
  probability decays by 10% per domain. Edges are drawn with numpy, one
  Bernoulli per node pair, which is the distribution of
  ``networkx.stochastic_block_model`` (networkx is not a dependency).
* :func:`digits_sequence` -- scikit-learn's handwritten digits: each domain
  takes its own random subset of images, rotates the 8x8 (standardised)
  images by ``rotation_deg * t`` and adds pixel noise of std
  ``noise * t``; nodes are joined to their k nearest neighbours in the
  distorted feature space, so the graph degrades with the features.

Everything is numpy and a pure function of the seed. :class:`PaddedDomains`
pads the graphs of several sequences to one static shape, so one compiled
adaptation step serves every domain and seed.
"""

import functools
from typing import NamedTuple

import numpy as np

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.data._digits import load_digits
from jaxpapers.data._digits import NUM_CLASSES as DIGITS_NUM_CLASSES
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import make_graph
from jaxpapers.graph._graphs import pad_graph
from jaxpapers.graph._graphs import padded_size
from jaxpapers.graph._graphs import symmetrize


class Domain(NamedTuple):
  """One domain: a graph with all node labels (hidden from the adapters)."""

  graph: GraphsTuple
  labels: np.ndarray  # (N,) int32
  train_mask: np.ndarray  # (N,) bool, source only (all False on targets)
  val_mask: np.ndarray
  test_mask: np.ndarray  # source: its test split; targets: every node


class DomainSequence(NamedTuple):
  domains: list[Domain]
  num_classes: int
  provenance: str


def _source_splits(rng: np.random.Generator, num_nodes: int):
  order = rng.permutation(num_nodes)
  masks = [np.zeros(num_nodes, bool) for _ in range(3)]
  cuts = (0, int(0.6 * num_nodes), int(0.8 * num_nodes), num_nodes)
  for mask, lo, hi in zip(masks, cuts[:-1], cuts[1:]):
    mask[order[lo:hi]] = True
  return masks


def _domain(t, rng, features, labels, senders, receivers) -> Domain:
  graph = make_graph(features.astype(np.float32), senders, receivers)
  num_nodes = labels.shape[0]
  if t == 0:
    train, val, test = _source_splits(rng, num_nodes)
  else:
    train = val = np.zeros(num_nodes, bool)
    test = np.ones(num_nodes, bool)
  return Domain(graph, labels.astype(np.int32), train, val, test)


def _rotation_in_plane(u1, u2, angle):
  dim = u1.shape[0]
  return (np.eye(dim) + (np.cos(angle) - 1) * (np.outer(u1, u1) + np.outer(u2, u2))
          + np.sin(angle) * (np.outer(u2, u1) - np.outer(u1, u2)))


def csbm_sequence(*, num_domains: int = 9, num_nodes: int = 2000,
                  num_classes: int = 4, feature_width: int = 32,
                  p_in: float = 0.01, p_out: float = 0.002,
                  p_in_decay: float = 0.9, mean_norm: float = 3.0,
                  rotation_deg: float = 15.0, offset: float = 0.3,
                  seed: int = 0) -> DomainSequence:
  """Contextual SBM domains 0..num_domains-1 with drifting class means.

  Args:
    num_domains: source plus targets (default: a source and 8 targets, the
      protocol of ``docs/emc.md``).
    num_nodes: nodes per domain, split evenly across classes.
    num_classes: C.
    feature_width: feature dimension.
    p_in: within-class edge probability of the source.
    p_out: between-class edge probability.
    p_in_decay: factor applied to ``p_in`` per domain.
    mean_norm: norm of the source class means.
    rotation_deg: rotation of the class means per domain.
    offset: global shift per domain along a fixed random unit vector.
    seed: all randomness.

  Returns:
    A :class:`DomainSequence`.

  Example:
    >>> seq = csbm_sequence(num_domains=2, num_nodes=40, seed=0)
    >>> [d.graph.nodes["features"].shape for d in seq.domains]
    [(40, 32), (40, 32)]
  """
  check_int("num_classes", num_classes, 1)
  # The class means rotate in a plane: two feature dimensions at least.
  check_int("feature_width", feature_width, 2)
  check_int("num_domains", num_domains, 2)
  check_int("num_nodes", num_nodes, 1)
  if num_nodes < 5 * num_classes:
    raise ValueError(
        "csbm_sequence needs num_domains >= 2 and num_nodes >= 5 * num_classes;"
        f" got {num_domains} and {num_nodes}."
    )
  check_int("seed", seed, 0)
  check_real("p_in", p_in, low=0.0, high=1.0)
  check_real("p_out", p_out, low=0.0, high=1.0)
  check_real("p_in_decay", p_in_decay, low=0.0)
  if p_in * p_in_decay ** (num_domains - 1) > 1:
    raise ValueError(
        f"p_in * p_in_decay^t must stay a probability (<= 1) for every domain"
        f" t < {num_domains}; got p_in={p_in}, p_in_decay={p_in_decay}.")
  check_real("mean_norm", mean_norm, low=0.0)
  check_real("rotation_deg", rotation_deg)
  check_real("offset", offset)
  fixed = np.random.default_rng([seed, 0])
  means = fixed.normal(size=(num_classes, feature_width))
  means *= mean_norm / np.linalg.norm(means, axis=1, keepdims=True)
  plane, _ = np.linalg.qr(fixed.normal(size=(feature_width, 2)))
  shift = fixed.normal(size=feature_width)
  shift /= np.linalg.norm(shift)
  domains = []
  for t in range(num_domains):
    rng = np.random.default_rng([seed, 1, t])
    labels = rng.permutation(np.arange(num_nodes) % num_classes)
    rotation = _rotation_in_plane(plane[:, 0], plane[:, 1],
                                  np.deg2rad(rotation_deg * t))
    mean_t = means @ rotation.T + offset * t * shift[None, :]
    features = mean_t[labels] + rng.normal(size=(num_nodes, feature_width))
    same = labels[:, None] == labels[None, :]
    prob = np.where(same, p_in * p_in_decay**t, p_out)
    upper = np.triu(rng.random((num_nodes, num_nodes)) < prob, k=1)
    senders, receivers = symmetrize(*np.nonzero(upper))
    domains.append(_domain(t, rng, features, labels, senders, receivers))
  provenance = (
      f"generated contextual SBM, seed {seed}: {num_domains} domains x"
      f" {num_nodes} nodes, {num_classes} balanced classes, features"
      f" N(mu_y, I_{feature_width}) with |mu|={mean_norm:g}; domain t rotates"
      f" the means by {rotation_deg:g} deg x t in a fixed random plane and"
      f" shifts them by {offset:g} x t along a fixed unit vector; p_in ="
      f" {p_in:g} x {p_in_decay:g}^t, p_out = {p_out:g} (numpy Bernoulli per"
      " pair)"
  )
  return DomainSequence(domains, num_classes, provenance)


def _rotate_images(images, angle_deg):
  from scipy import ndimage  # pylint: disable=g-import-not-at-top
  if angle_deg == 0:
    return images
  return ndimage.rotate(images, angle_deg, axes=(1, 2), reshape=False, order=1,
                        mode="constant", cval=0.0)


def knn_edges(features: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """Symmetrised k-nearest-neighbour edges (Euclidean), no self loops.

  Raises:
    ValueError: ``features`` not a 2-D array of finite numbers (a NaN row
      would be nobody's neighbour), or ``k`` not an int in ``[1, N - 1]``.
  """
  features = np.asarray(features)  # a device array is read to the host
  if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
    raise ValueError(
        f"features must be a (N, F) numeric array; got shape {features.shape}"
        f" and dtype {features.dtype}.")
  if not np.all(np.isfinite(features)):
    raise ValueError("features holds NaN or inf; k-NN distances need finite"
                     " features.")
  check_int("k", k, 1)
  if k > features.shape[0] - 1:
    raise ValueError(
        f"k={k} must be at most N - 1 = {features.shape[0] - 1} (a node is not"
        " its own neighbour).")
  sq = np.sum(features**2, axis=1)
  d2 = sq[:, None] + sq[None, :] - 2 * features @ features.T
  np.fill_diagonal(d2, np.inf)
  neighbours = np.argpartition(d2, k, axis=1)[:, :k]
  senders = np.repeat(np.arange(features.shape[0]), k)
  return symmetrize(senders, neighbours.reshape(-1))


def digits_sequence(*, num_domains: int = 9, nodes_per_domain: int = 1000,
                    k: int = 10, rotation_deg: float = 7.5, noise: float = 0.15,
                    seed: int = 0) -> DomainSequence:
  """Digits k-NN graphs with progressively stronger image distortions.

  Args:
    num_domains: source plus targets.
    nodes_per_domain: images per domain (a fresh random subset of the 1797).
    k: neighbours per node before symmetrisation.
    rotation_deg: image rotation per domain (degrees).
    noise: pixel-noise std per domain, in units of the standardised pixels.
    seed: all randomness.

  Returns:
    A :class:`DomainSequence` with 10 classes and 64 features.
  """
  check_int("nodes_per_domain", nodes_per_domain, 0)
  check_int("num_domains", num_domains, 0)
  check_int("k", k, 0)
  check_int("seed", seed, 0)
  check_real("rotation_deg", rotation_deg)
  check_real("noise", noise, low=0.0)
  digits = load_digits()
  total = digits.x.shape[0]
  if not 10 * DIGITS_NUM_CLASSES <= nodes_per_domain <= total:
    raise ValueError(
        f"nodes_per_domain must lie in [{10 * DIGITS_NUM_CLASSES}, {total}];"
        f" got {nodes_per_domain}."
    )
  if num_domains < 2 or not 1 <= k < nodes_per_domain:
    raise ValueError(
        "need num_domains >= 2 and k in [1, nodes_per_domain); got"
        f" {num_domains}, {k}.")
  domains = []
  for t in range(num_domains):
    rng = np.random.default_rng([seed, 2, t])
    keep = np.sort(rng.choice(total, nodes_per_domain, replace=False))
    images = digits.x[keep].reshape(-1, 8, 8).astype(np.float64)
    images = _rotate_images(images, rotation_deg * t)
    features = images.reshape(-1, 64) + noise * t * rng.normal(size=(keep.size, 64))
    senders, receivers = knn_edges(features, k)
    domains.append(_domain(t, rng, features, digits.clean_labels[keep],
                           senders, receivers))
  provenance = (
      f"{digits.provenance}; {num_domains} domains of {nodes_per_domain} random"
      f" images each (seed {seed}), domain t rotated by {rotation_deg:g} deg x t"
      f" with pixel noise std {noise:g} x t, symmetrised {k}-NN graph on the"
      " distorted features"
  )
  return DomainSequence(domains, DIGITS_NUM_CLASSES, provenance)


class PaddedDomains:
  """The domains of several sequences (one per seed) padded to one static shape.

  Node and edge counts are the largest over every domain of every sequence,
  rounded up to a multiple of ``multiple``; ``graphs[seed][t]`` is domain
  ``t`` of ``sequences[seed]`` padded, and :meth:`node_array` pads a per-node
  array (labels, masks) to match.

  Example:
    >>> seq = csbm_sequence(num_domains=2, num_nodes=40, seed=0)
    >>> padded = PaddedDomains({0: seq}, multiple=64)
    >>> padded.num_nodes, padded.node_array(seq.domains[0].labels).shape
    (64, (64,))
  """

  def __init__(self, sequences: dict[int, DomainSequence], multiple: int):
    every = [d.graph for s in sequences.values() for d in s.domains]
    if not every:
      raise ValueError("sequences holds no domain: there is no size to pad to.")
    check_int("multiple", multiple, 1)
    self.num_nodes = padded_size(max(int(g.n_node.sum()) for g in every),
                                 multiple)
    self.num_edges = padded_size(max(int(g.n_edge.sum()) for g in every),
                                 multiple)
    pad = functools.partial(pad_graph, num_nodes=self.num_nodes,
                            num_edges=self.num_edges)
    self.graphs = {seed: [pad(d.graph) for d in s.domains]
                   for seed, s in sequences.items()}
    self.sequences = sequences

  def node_arrays(self, seed: int, field: str) -> list[np.ndarray]:
    """A per-node ``field`` of every domain of ``sequences[seed]``, padded.

    Args:
      seed: a key of ``sequences``.
      field: ``"labels"``, ``"train_mask"``, ``"val_mask"`` or ``"test_mask"``
        (a :class:`Domain` field).

    Returns:
      One :meth:`node_array` per domain, in sequence order.

    Raises:
      ValueError: an unknown ``seed`` or ``field``.

    Example:
      >>> seq = csbm_sequence(num_domains=2, num_nodes=40, seed=0)
      >>> [a.shape for a in PaddedDomains({0: seq}, 64).node_arrays(0, "labels")]
      [(64,), (64,)]
    """
    if seed not in self.sequences:
      raise ValueError(f"seed {seed!r} is not one of the padded sequences'"
                       f" {sorted(self.sequences)}.")
    fields = [f for f in Domain._fields if f != "graph"]
    if field not in fields:
      raise ValueError(f"field must be one of {fields}; got {field!r}.")
    return [self.node_array(getattr(d, field))
            for d in self.sequences[seed].domains]

  def node_array(self, values: np.ndarray) -> np.ndarray:
    """``values`` (one per real node) followed by zeros on the padding nodes."""
    values = np.asarray(values)
    if values.ndim != 1 or values.shape[0] >= self.num_nodes:
      raise ValueError(
          f"values must be 1-D with fewer than {self.num_nodes} entries (one"
          f" per real node); got shape {values.shape}.")
    out = np.zeros((self.num_nodes,), values.dtype)
    out[: values.shape[0]] = values
    return out
