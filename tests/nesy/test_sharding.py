"""jaxpapers.nesy under Auto and Explicit meshes gives the unsharded numbers.

Every function takes a batch of examples, (B, K, V) logits and labels, here
sharded along the mesh's data axis (and the logits' value axis along model
where V divides it: not addition's 10 digits). One case shards addition's
symbol axis (two digits over "data", the batch over "model").
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import nesy
from jaxpapers import tree
from tests import sharding_checks

_rng = np.random.default_rng(0)
_ADDITION = nesy.DigitAddition(1)
_ENUMERATED = nesy.addition_program(1)
_XOR = nesy.enumerate_program(lambda z: z[0] ^ z[1] ^ z[2], 3, 4)
_LOGITS_BxKxV = jnp.asarray(_rng.normal(size=(8, 2, 10)), jnp.float32)
_LABELS_BxL = jnp.asarray(nesy.sum_to_digits(
    list(_rng.integers(0, 19, 8)), 1)).at[0, 1].set(2)  # one infeasible
_ONE_DIGIT_LOGITS = jnp.asarray(_rng.normal(size=(8, 2, 10)), jnp.float32)
_ONE_DIGIT_LABELS = jnp.asarray(_rng.integers(0, 19, 8), jnp.int32)
_XOR_LOGITS = jnp.asarray(_rng.normal(size=(8, 3, 4)), jnp.float32)
_XOR_LABELS = jnp.asarray(_rng.integers(0, 4, 8), jnp.int32)
_KEY = jax.random.key(0)
_DATA = jax.P("data")
_OPT = optax.sgd(0.1)
_STATE = nesy.init_state(_KEY, _OPT, (4, 6, 10))
_IMAGES = jnp.asarray(_rng.normal(size=(8, 4)), jnp.float32)
_DIGITS = jnp.asarray(_rng.integers(0, 10, 8), jnp.int32)
_PROBLEMS, _SUM_LABELS = (jnp.asarray(a) for a in nesy.addition_examples(
    np.asarray(_DIGITS), 8, 1, seed=0))


def _em_step(logits, labels):
  """The exact M-step loss, its gradient, and a second M-step on new logits."""
  step = nesy.estep(_ADDITION)
  (loss, posterior), grad = jax.value_and_grad(
      lambda l: nesy.em_step(step, None, l, labels), has_aux=True)(logits)
  return loss, grad, posterior, nesy.em_loss(2 * logits, posterior)


def _semantic(logits, labels):
  return (nesy.log_z(_ADDITION, logits, labels),
          jax.value_and_grad(nesy.semantic_loss, 1)(_ADDITION, logits, labels))


def _reinforce(key, logits, labels):
  return jax.value_and_grad(
      lambda l: nesy.reinforce_loss(_ADDITION, key, l, labels, num_samples=2),
      has_aux=True)(logits)


def _chain(key, logits, labels):
  """DigitAddition's sampling E-step and its per-example methods, vmapped."""
  logp = jax.nn.log_softmax(logits, -1)
  map_z, map_logp = jax.vmap(_ADDITION.map_assignment)(logp, labels)
  return (nesy.estep(_ADDITION, "stochastic")(key, logits, labels),
          jax.vmap(_ADDITION.marginals)(logp, labels), map_z, map_logp,
          jax.vmap(_ADDITION.satisfied)(map_z, labels))


def _enumerated(key, keys, logits, labels, sum_logits, sums):
  """Enumerated programs: E-steps and the per-example methods, vmapped."""
  logp = jax.nn.log_softmax(logits, -1)
  map_z, map_logp = jax.vmap(_XOR.map_assignment)(logp, labels)
  return (nesy.estep(_XOR, "rejection", num_samples=4)(key, logits, labels),
          nesy.estep(_ENUMERATED, "hard")(None, sum_logits, sums),
          jax.vmap(_XOR.marginals)(logp, labels), map_z, map_logp,
          jax.vmap(_XOR.sample)(keys, logp, labels),
          # A table read at per-example worlds: mapped per device.
          tree.vmap_sharded(_XOR.satisfied)(map_z, labels))


def _digits_sharded(key, logits, labels):
  """The chain's per-example methods and log Z with the symbol axis sharded."""
  return _chain(key, logits, labels), _semantic(logits, labels)


def _train_step(state, key, x, labels):
  """One exact-EM step and one semantic-loss step from the same state."""
  return [nesy.make_train_step(m, _ADDITION, _OPT)(state, key, x, labels)
          for m in ("em_exact", "semantic")]


def _train_epoch(state, key, images, problems, labels):
  step = nesy.make_train_step("em_exact", _ADDITION, _OPT)
  return nesy.train_epoch(step, state, key, images, problems, labels,
                          batch_size=4)


def _accuracy(params, images, problems, labels, digits):
  return nesy.addition_accuracy(_ADDITION, params, images, problems, labels,
                                digits)


CASES = {
    # The batch along "data"; the state and key replicated.
    "nesy.make_train_step": (
        _train_step, (_STATE, _KEY, _IMAGES[_PROBLEMS], _SUM_LABELS),
        (None, None, _DATA, _DATA)),
    # The sums along "data", the image pool replicated (each device gathers
    # its own sums' images).
    "nesy.train_epoch": (
        _train_epoch, (_STATE, _KEY, _IMAGES, _PROBLEMS, _SUM_LABELS),
        (None, None, None, _DATA, _DATA)),
    "nesy.addition_accuracy": (
        _accuracy, (_STATE.params, _IMAGES, _PROBLEMS, _SUM_LABELS, _DIGITS),
        (None, None, _DATA, _DATA, None)),
    "nesy.estep+nesy.em_step+nesy.em_loss": (
        _em_step, (_LOGITS_BxKxV, _LABELS_BxL), (_DATA, _DATA)),
    "nesy.log_z+nesy.semantic_loss": (_semantic, (_LOGITS_BxKxV, _LABELS_BxL),
                                      (_DATA, _DATA)),
    "nesy.reinforce_loss": (_reinforce, (_KEY, _LOGITS_BxKxV, _LABELS_BxL),
                            (None, _DATA, _DATA)),
    "nesy.DigitAddition": (_chain, (_KEY, _LOGITS_BxKxV, _LABELS_BxL),
                           (None, _DATA, _DATA)),
    "nesy.DigitAddition+nesy.log_z+nesy.semantic_loss": (
        _digits_sharded, (_KEY, _LOGITS_BxKxV, _LABELS_BxL),
        (None, jax.P("model", "data"), jax.P("model"))),
    "nesy.EnumeratedProgram+nesy.enumerate_program+nesy.addition_program": (
        _enumerated, (_KEY, jax.random.split(_KEY, 8), _XOR_LOGITS, _XOR_LABELS,
                      _ONE_DIGIT_LOGITS, _ONE_DIGIT_LABELS),
        (None, _DATA, jax.P("data", None, "model"), _DATA, _DATA, _DATA)),
}

NOT_SHARDED = {
    "nesy.init_state": "builds an MLP and its optimizer state from a key and"
                       " Python sizes; takes no batch",
    "nesy.addition_batch": "host-side numpy draw of problems"
                           " (nesy.addition_examples) and one gather",
    "nesy.step_costs": "compiles and times training steps on host-built"
                       " batches: a wall-clock measurement, not a"
                       " computation on device arrays",
    "nesy.addition_examples": "host-side numpy: draws pool indices and sums"
                              " them with Python carries",
    "nesy.digits_to_int": "host-side Python ints, exact for any length",
    "nesy.sum_to_digits": "host-side Python ints to a numpy digit array",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "nesy.make_train_step": ("Explicit",),
    "nesy.train_epoch": ("Explicit",),
    "nesy.addition_accuracy": ("Explicit",),
    "nesy.DigitAddition": ("Explicit",),
    "nesy.DigitAddition+nesy.log_z+nesy.semantic_loss": ("Explicit",),
    "nesy.EnumeratedProgram+nesy.enumerate_program+nesy.addition_program":
        ("Explicit",),
    "nesy.estep+nesy.em_step+nesy.em_loss": ("Explicit",),
    "nesy.log_z+nesy.semantic_loss": ("Auto", "Explicit"),
    "nesy.reinforce_loss": ("Explicit",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "nesy.DigitAddition",
    "nesy.DigitAddition+nesy.log_z+nesy.semantic_loss",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))
