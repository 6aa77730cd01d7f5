"""The drifting domain sequences."""

import numpy as np

from jaxpapers.data import load_digits
from jaxpapers.graph import _domains as domains


def _check_undirected(graph):
  pairs = set(zip(graph.senders.tolist(), graph.receivers.tolist()))
  assert all((r, s) in pairs for s, r in pairs)
  assert not np.any(graph.senders == graph.receivers)


def test_csbm_sequence_drifts_as_specified():
  seq = domains.csbm_sequence(num_domains=4, num_nodes=400, p_in=0.05,
                              p_in_decay=0.5, seed=1)
  within = []
  for t, d in enumerate(seq.domains):
    _check_undirected(d.graph)
    assert np.bincount(d.labels).tolist() == [100] * 4
    same = d.labels[d.graph.senders] == d.labels[d.graph.receivers]
    within.append(same.sum() / (4 * 100 * 99))  # both directions counted
    between = (~same).sum() / (400 * 300)
    np.testing.assert_allclose(between, 0.002, rtol=0.25)
  # p_in halves per domain here (the default decay is 0.9).
  np.testing.assert_allclose(within, 0.05 * 0.5 ** np.arange(4), rtol=0.2)
  source = seq.domains[0]
  assert source.train_mask.sum() == 240 and source.val_mask.sum() == 80
  assert not np.any(source.train_mask & source.test_mask)
  assert seq.domains[1].test_mask.all() and not seq.domains[1].train_mask.any()
  again = domains.csbm_sequence(num_domains=4, num_nodes=400, p_in=0.05,
                                p_in_decay=0.5, seed=1)
  np.testing.assert_array_equal(again.domains[3].graph.senders,
                                seq.domains[3].graph.senders)


def _class_means(domain):
  x = domain.graph.nodes["features"]
  return np.stack([x[domain.labels == c].mean(0) for c in range(4)])


def test_csbm_class_means_shift_and_rotate():
  # In 2-D the random rotation plane is the whole space.
  shifted = domains.csbm_sequence(num_domains=4, num_nodes=2000, feature_width=2,
                                  rotation_deg=0.0, seed=2)
  moves = _class_means(shifted.domains[3]) - _class_means(shifted.domains[0])
  np.testing.assert_allclose(np.linalg.norm(moves, axis=1), 0.9, atol=0.2)
  np.testing.assert_allclose(moves, np.broadcast_to(moves.mean(0), moves.shape),
                             atol=0.25)  # one common offset vector
  rotated = domains.csbm_sequence(num_domains=4, num_nodes=2000, feature_width=2,
                                  offset=0.0, seed=2)
  before, after = _class_means(rotated.domains[0]), _class_means(rotated.domains[3])
  cross = before[:, 0] * after[:, 1] - before[:, 1] * after[:, 0]
  angle = np.degrees(np.arctan2(cross, np.sum(before * after, 1)))
  np.testing.assert_allclose(np.abs(angle), 45.0, atol=6.0)  # 15 deg x 3
  assert np.ptp(np.sign(angle)) == 0  # all means turn the same way


def test_digits_sequence_uses_digit_labels_and_knn_graphs():
  seq = domains.digits_sequence(num_domains=3, nodes_per_domain=300, k=5, seed=0)
  digits = load_digits()
  assert seq.num_classes == 10
  for t, d in enumerate(seq.domains):
    _check_undirected(d.graph)
    assert d.graph.nodes["features"].shape == (300, 64)
    assert np.bincount(d.graph.receivers, minlength=300).min() >= 5
    assert set(d.labels.tolist()) <= set(range(10))
  # The undistorted source features are the digits rows of its labels.
  x0 = seq.domains[0].graph.nodes["features"]
  rows = [np.flatnonzero(np.all(np.isclose(digits.x, x), axis=1))[0] for x in x0[:5]]
  np.testing.assert_array_equal(digits.clean_labels[rows], seq.domains[0].labels[:5])


def test_padded_domains_share_one_shape_across_seeds():
  sequences = {seed: domains.csbm_sequence(num_domains=2, num_nodes=40 + 20 * seed,
                                           seed=seed) for seed in (0, 1)}
  padded = domains.PaddedDomains(sequences, multiple=64)
  assert padded.num_nodes == 64  # the larger sequence (60 nodes), rounded up
  edges = max(int(d.graph.n_edge.sum()) for s in sequences.values()
              for d in s.domains)
  assert padded.num_edges >= edges and padded.num_edges % 64 == 0
  for seed, sequence in sequences.items():
    for graph, domain in zip(padded.graphs[seed], sequence.domains):
      assert graph.nodes["features"].shape == (64, 32)
      np.testing.assert_array_equal(graph.nodes["features"][:len(domain.labels)],
                                    domain.graph.nodes["features"])
  labels = padded.node_array(sequences[0].domains[0].labels)
  assert labels.shape == (64,) and not labels[40:].any()
  np.testing.assert_array_equal(labels[:40], sequences[0].domains[0].labels)
