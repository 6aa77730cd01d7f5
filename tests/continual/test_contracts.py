"""jaxpapers.continual: a table of misuse, each a named error."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import continual

_GRAPHS, _PARAMS = continual.init_learner(jax.random.key(0), 4, 2, 3)
_X, _LABELS, _WEIGHTS = jnp.ones((4, 4)), jnp.zeros(4, jnp.int32), jnp.ones(4)
_TRAINING = continual.TaskTraining(epochs=1, batch_size=2)
_Z = jnp.zeros(2)


def _train(**overrides):
  kwargs = {"x_NxD": _X, "labels_N": _LABELS, "weights_N": _WEIGHTS,
            "num_seen": 3, "num_frozen": 1, **overrides}
  return continual.train_task(_GRAPHS, _PARAMS, key=jax.random.key(1),
                              training=_TRAINING, **kwargs)


_ROWS = continual.TaskRows(np.ones((4, 4)), np.array([0, 1, 1, 0]),
                           classes_per_task=1, batch_size=2)


def _learn(**overrides):
  kwargs = {"task_rows": _ROWS, "x_test_NxD": _X, "labels_test_N": _LABELS,
            "task_keys": [jax.random.key(1)] * 2, "classes_per_task": 1,
            "training": _TRAINING, **overrides}
  return continual.learn_sequence(_GRAPHS, _PARAMS, **kwargs)


MISUSE = [
    (lambda: continual.LowRankAdapter(4.0, 2, rngs=nnx.Rngs(0)), TypeError,
     "features must be an int"),
    (lambda: continual.LowRankAdapter(4, 0, rngs=nnx.Rngs(0)), ValueError,
     "rank must be an int >= 1"),
    (lambda: continual.LowRankAdapter(4, 2, rngs=nnx.Rngs(0))(jnp.ones((2, 5))),
     ValueError, "x_BxD must end in the feature width 4"),
    (lambda: continual.CosineClassifier(4, 3, rngs=nnx.Rngs(0))(
        jnp.ones((2, 4), jnp.int32)), TypeError, "x_BxD must hold real floating"),
    (lambda: continual.CosineClassifier(4, 0, rngs=nnx.Rngs(0)), ValueError,
     "num_classes must be an int >= 1"),
    (lambda: continual.CosineClassifier(4, True, rngs=nnx.Rngs(0)), TypeError,
     "num_classes must be an int"),
    # scale=inf used to give inf/NaN logits.
    (lambda: continual.CosineClassifier(4, 3, scale=float("inf"),
                                        rngs=nnx.Rngs(0)), ValueError,
     "scale must be > 0 and finite"),
    (lambda: continual.init_learner(jax.random.key(0), 4, 2, 3, scale=np.nan),
     ValueError, "scale must be > 0 and finite"),
    # num_seen = 0 used to mask every class: uniform logits, silently.
    (lambda: continual.logits(_GRAPHS, _PARAMS, _X, 0), ValueError,
     r"num_seen must lie in \[1, 3\]"),
    (lambda: continual.logits(_GRAPHS, _PARAMS, _X, 1.5), TypeError,
     "num_seen must be an int class count"),
    (lambda: _train(num_seen=4), ValueError, r"num_seen must lie in \[1, 3\]"),
    (lambda: _train(num_frozen=3, num_seen=2), ValueError,
     "num_frozen 3 must be <= num_seen 2"),
    (lambda: _train(labels_N=jnp.zeros(3, jnp.int32)), ValueError,
     r"labels_N must be \(4,\) int class ids"),
    (lambda: _train(weights_N=jnp.ones(4, jnp.int32)), ValueError,
     r"weights_N must be \(4,\) float row weights"),
    (lambda: _train(x_NxD=jnp.ones((3, 4)), labels_N=jnp.zeros(3, jnp.int32),
                    weights_N=jnp.ones(3)), ValueError,
     "not a multiple of batch_size"),
    (lambda: continual.adapter_fisher(_GRAPHS, _PARAMS, _X, _LABELS[:2],
                                      _WEIGHTS, 3), ValueError,
     r"labels_N must be \(4,\)"),
    # Labels of weighted rows: a class not yet seen (or not in the head)
    # used to train on a masked logit (loss 1e9); a negative one wrapped.
    (lambda: _train(labels_N=_LABELS.at[1].set(3)), ValueError,
     r"labels_N of rows of nonzero weight must lie in \[0, 3\)"),
    (lambda: _train(labels_N=_LABELS.at[1].set(2), num_seen=2), ValueError,
     r"must lie in \[0, 2\)"),
    (lambda: _train(labels_N=_LABELS.at[1].set(-1)), ValueError,
     r"must lie in \[0, 3\)"),
    (lambda: _train(weights_N=_WEIGHTS.at[2].set(np.nan)), ValueError,
     "weights_N must be finite and >= 0"),
    (lambda: _train(weights_N=_WEIGHTS.at[2].set(-1.0)), ValueError,
     "weights_N must be finite and >= 0"),
    # The Fisher weights squared gradients: only 0/1 row weights mean rows.
    (lambda: continual.adapter_fisher(_GRAPHS, _PARAMS, _X, _LABELS,
                                      _WEIGHTS * 0.5, 3), ValueError,
     r"weights_N must be in \{0, 1\}"),
    (lambda: continual.adapter_fisher(_GRAPHS, _PARAMS, _X, _LABELS, _WEIGHTS,
                                      0), ValueError,
     r"num_seen must lie in \[1, 3\]"),
    (lambda: continual.adapter_fisher(_GRAPHS, _PARAMS, _X,
                                      _LABELS.at[0].set(5), _WEIGHTS, 3),
     ValueError, r"must lie in \[0, 3\)"),
    (lambda: continual.predict(_GRAPHS, _PARAMS, _X, 4), ValueError,
     r"num_seen must lie in \[1, 3\]"),
    (lambda: continual.predict(_GRAPHS, _PARAMS, _X, 2.0), TypeError,
     "num_seen must be an int class count"),
    (lambda: continual.predict(_GRAPHS, _PARAMS, jnp.ones((2, 3)), 3),
     ValueError, "x_BxD must end in the feature width 4"),
    (lambda: continual.class_order(0, 0), ValueError,
     "num_classes must be an int >= 1"),
    (lambda: continual.TaskRows(np.ones(4), np.zeros(4, np.int32),
                                classes_per_task=1, batch_size=2), ValueError,
     r"x_NxD must be \(N, D\) features"),
    (lambda: continual.TaskRows(np.ones((4, 2)), np.array([0, 1, -1, 0]),
                                classes_per_task=1, batch_size=2), ValueError,
     "labels_N must be one int class >= 0 per row"),
    (lambda: continual.TaskRows(np.ones((4, 2)), np.zeros(4, np.int32),
                                classes_per_task=0, batch_size=2), ValueError,
     "classes_per_task must be an int >= 1"),
    (lambda: _ROWS(1, 0), ValueError, "need 0 <= first <= last"),
    (lambda: _ROWS(2, 2), ValueError, "tasks 2..2 hold no training row"),
    (lambda: continual.sequence_metrics([]), ValueError, "records is empty"),
    (lambda: continual.sequence_metrics(
        [{"seen_accuracy": 1.0, "task_accuracy": [1.0, 1.0]}]), ValueError,
     r"records\[0\]\['task_accuracy'\] must hold 1 accuracies"),
    (lambda: _learn(start="fresh"), ValueError, "start must be one of"),
    (lambda: _learn(task_keys=[]), ValueError, "task_keys is empty"),
    (lambda: _learn(classes_per_task=2), ValueError,
     "2 tasks x 2 classes exceed the head's 3 classes"),
    (lambda: _learn(labels_test_N=np.zeros(3, np.int32)), ValueError,
     r"labels_test_N must be one class per test row \(4,\)"),
    (lambda: continual.TaskTraining(momentum=1.0), ValueError,
     "0 <= momentum < 1"),
    (lambda: continual.TaskTraining(momentum=np.nan), ValueError,
     "momentum must be >= 0 and finite"),
    (lambda: continual.TaskTraining(learning_rate=float("inf")), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: continual.TaskTraining(weight_decay=float("inf")), ValueError,
     "weight_decay must be >= 0 and finite"),
    (lambda: continual.TaskTraining(epochs=2.5), TypeError,
     "epochs must be an int"),
    (lambda: continual.TaskTraining(batch_size=-4), ValueError,
     "batch_size must be an int >= 1"),
    (lambda: continual.TaskTraining(learning_rate="0.01"), TypeError,
     "learning_rate must be a real number"),
    (lambda: continual.FusionConfig(mode="average"), ValueError,
     "mode must be one of"),
    (lambda: continual.FusionConfig(rho=-1.0), ValueError,
     "rho must be >= 0 and finite"),
    # rho = inf made lambda inf and the fused adapter NaN.
    (lambda: continual.FusionConfig(rho=float("inf")), ValueError,
     "rho must be >= 0 and finite"),
    (lambda: continual.FusionConfig(rho=np.nan), ValueError,
     "rho must be >= 0 and finite"),
    (lambda: continual.FusionConfig(rho="0.1"), TypeError,
     "rho must be a real number"),
    (lambda: continual.FusionConfig(per_layer=1), TypeError,
     "per_layer must be a bool"),
    (lambda: continual.fuse(_Z, _Z, _Z, _Z, jnp.zeros(3), 1), ValueError,
     "h_new must have the leaf shapes of params"),
    (lambda: continual.fuse(_Z, _Z, _Z, _Z, _Z, np.int32(0)), ValueError,
     "task_index must be >= 1"),
    # A float t was truncated by the check and used as given (beta = 1/1.5).
    (lambda: continual.fuse(_Z, _Z, _Z, _Z, _Z, 1.5), TypeError,
     "task_index must be an integer"),
    (lambda: continual.fuse(_Z, _Z, _Z, _Z, _Z, True), TypeError,
     "task_index must be an integer"),
    # The dtype is known while tracing: refused before any compilation.
    (lambda: jax.jit(continual.fuse)(_Z, _Z, _Z, _Z, _Z, jnp.float32(2.0)),
     TypeError, "task_index must be an integer"),
    (lambda: continual.fuse(_Z, _Z, _Z, _Z, _Z, np.array([1, 2])), ValueError,
     "task_index must be a scalar"),
    (lambda: continual.fuse(*[jnp.zeros(0)] * 5, 1), ValueError,
     "every leaf of the adapter pytree has size 0"),
    (lambda: continual.init({}), ValueError, "theta0 is empty"),
    (lambda: continual.update(continual.init(_Z), jnp.zeros(3), _Z),
     ValueError, "task must have the leaf shapes of params"),
    (lambda: continual.init(jnp.zeros(2, jnp.int32)), TypeError,
     "theta0 must hold real floating-point arrays"),
    (lambda: continual.objective(0.5, 0.5, _Z, _Z, _Z, _Z, {"w": _Z}, 0.0),
     ValueError, "h_new must have the pytree structure of params"),
    (lambda: continual.objective(0.5, 0.5, _Z, _Z, _Z, _Z, _Z, np.nan),
     ValueError, "lam must be a finite scalar >= 0"),
    (lambda: continual.objective(0.5, 0.5, _Z, _Z, _Z, _Z, _Z, -1.0),
     ValueError, "lam must be a finite scalar >= 0"),
    (lambda: continual.class_incremental_metrics(np.zeros((0, 0)), np.zeros(0)),
     ValueError, "T >= 1"),
    (lambda: continual.class_incremental_metrics(np.array([[90.0]]),
                                                 np.array([0.9])), ValueError,
     r"task_accuracy .on and below the diagonal. must be accuracies in \[0, 1\]"),
    (lambda: continual.class_incremental_metrics(np.array([[0.5]]),
                                                 np.array([np.nan])),
     ValueError, r"seen_accuracy must be accuracies in \[0, 1\]"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
