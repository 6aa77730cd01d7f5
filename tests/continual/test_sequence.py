"""The task split and the sequence that learns one global adapter."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import continual


def test_class_order_renumbers_classes_in_order_of_arrival():
  position = continual.class_order(3, 10)
  arrival = np.random.default_rng(3).permutation(10)
  assert position[arrival].tolist() == list(range(10))


def test_tasks_are_padded_to_whole_batches_of_their_classes():
  labels = np.repeat(np.arange(6), [5, 3, 4, 7, 2, 6])
  x = np.arange(labels.size, dtype=np.float32)[:, None] * np.ones((1, 3))
  rows = continual.TaskRows(x, labels, classes_per_task=2, batch_size=4)
  assert rows.task_size == 16  # 2 x the largest class (7), rounded up
  x2, labels2, weights2 = rows(1, 1)
  assert x2.shape == (16, 3) and set(np.asarray(labels2)) == {2, 3}
  assert float(jnp.sum(weights2)) == 11  # 4 + 7 real rows, the rest padding
  real = np.asarray(weights2) == 1
  np.testing.assert_array_equal(np.asarray(x2)[real, 0],
                                np.flatnonzero(np.isin(labels, [2, 3])))
  # A span of tasks: their rows, task_size rows per task.
  x3, labels3, weights3 = rows(0, 1)
  assert x3.shape[0] == 32 and float(jnp.sum(weights3)) == 19
  assert set(np.asarray(labels3)[np.asarray(weights3) == 1]) == {0, 1, 2, 3}


def _learn(**kwargs):
  graphs, params = continual.init_learner(jax.random.key(0), 4, 2, 4)
  x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 4)), jnp.float32)
  labels = np.arange(8) % 4
  rows = continual.TaskRows(np.asarray(x), labels, classes_per_task=2,
                            batch_size=2)
  keys = [jax.random.key(7), jax.random.key(8)]
  training = continual.TaskTraining(epochs=2, batch_size=2)
  records = continual.learn_sequence(graphs, params, rows, x, labels, keys,
                                     classes_per_task=2, training=training,
                                     **kwargs)
  return graphs, params, rows, x, labels, keys, training, records


def test_learn_sequence_fuses_each_task_adapter_as_update_does():
  fusion = continual.FusionConfig(mode="running_mean")
  graphs, params, rows, x, labels, keys, training, records = _learn(
      fusion=fusion)
  # The same loop by hand: train from the global adapter, fuse, predict.
  state, head = continual.init(params["adapter"]), params["head"]
  for t, key in enumerate(keys):
    xt, yt, wt = rows(t, t)
    trained = continual.train_task(
        graphs, {"adapter": state.global_params, "head": head}, xt, yt, wt,
        key, num_seen=2 * (t + 1), num_frozen=2 * t, training=training)
    head = trained["head"]
    state, info = continual.update(state, trained["adapter"],
                                   continual.adapter_fisher(
                                       graphs, trained, xt, yt, wt, 2 * t + 2),
                                   fusion)
    assert np.isclose(records[t]["beta"], 1 / (t + 1))
    assert np.isclose(records[t]["alpha"], float(info.alpha))
    correct = np.asarray(continual.predict(
        graphs, {"adapter": state.global_params, "head": head}, x,
        2 * t + 2)) == labels
    assert np.isclose(records[t]["seen_accuracy"],
                      np.mean(correct[labels < 2 * t + 2]), atol=1e-6)
  assert [len(r["task_accuracy"]) for r in records] == [1, 2]


def test_without_fusion_the_newest_adapter_is_the_global_one():
  *_, records = _learn(start="joint")
  assert "beta" not in records[0] and [r["step"] for r in records] == [0, 1]
  assert all(0 <= r["seen_accuracy"] <= 1 for r in records)


def test_sequence_metrics_of_records():
  records = [
      {"step": 0, "seen_accuracy": 1.0, "task_accuracy": [1.0], "beta": 1.0,
       "alpha": 0.0, "num_clipped": 0},
      {"step": 1, "seen_accuracy": 0.7, "task_accuracy": [0.6, 0.8],
       "beta": 0.4, "alpha": 0.5, "num_clipped": 2}]
  s = continual.sequence_metrics(records)
  assert np.isclose(s["average_incremental_accuracy"], 0.85)
  assert s["final_accuracy"] == 0.7
  assert np.isclose(s["forgetting"], 0.4)
  assert s["beta"] == [1.0, 0.4] and s["num_clipped"] == 2
  plain = continual.sequence_metrics(
      [{k: v for k, v in r.items() if k in ("seen_accuracy", "task_accuracy")}
       for r in records])
  assert "beta" not in plain and plain["num_clipped"] == 0
