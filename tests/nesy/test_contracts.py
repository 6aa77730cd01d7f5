"""jaxpapers.nesy: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import nesy

_PROGRAM = nesy.DigitAddition(1)
_TABLE = nesy.addition_program(1)
_LOGITS = jnp.zeros((2, 2, 10))
_LABELS = jnp.zeros((2, 2), jnp.int32)
_OPT = optax.sgd(0.1)
_STEP = nesy.make_train_step("semantic", _PROGRAM, _OPT)
_STATE = nesy.init_state(jax.random.key(0), _OPT, (4, 3, 10))
_IMAGES = jnp.zeros((5, 4))
_PROBLEMS = jnp.zeros((6, 2), jnp.int32)

MISUSE = [
    (lambda: nesy.DigitAddition(0), ValueError, "num_digits must be an int >= 1"),
    (lambda: nesy.sum_to_digits(3, 0), ValueError,
     "num_digits must be an int >= 1"),
    (lambda: nesy.sum_to_digits(200, 2), nesy.UnreachableSumError,
     "not a sum of two 2-digit numbers"),
    # A "digit" of 12 used to be read as 12 * 10^i.
    (lambda: nesy.digits_to_int([3, 12]), ValueError, "digits must lie in 0..9"),
    (lambda: nesy.addition_examples(np.array([1, 10]), 4, 1, seed=0), ValueError,
     "digit_labels must be a non-empty 1-D int array of classes in 0..9"),
    (lambda: nesy.addition_examples(np.zeros((2, 2), np.int32), 4, 1, seed=0),
     ValueError, "digit_labels must be a non-empty 1-D"),
    (lambda: nesy.addition_examples(np.arange(10), 0, 1, seed=0), ValueError,
     "num_sums and num_digits must be >= 1"),
    (lambda: nesy.addition_program(0), ValueError,
     "num_digits must be an int >= 1"),
    (lambda: nesy.enumerate_program(lambda z: 0, 2.0, 2), ValueError,
     "need num_symbols >= 1 and num_values >= 2"),
    (lambda: nesy.EnumeratedProgram(np.zeros((3, 2), np.int32),
                                    np.zeros(3, np.int32), 2), ValueError,
     r"worlds must be \(V\^K, K\)"),
    (lambda: nesy.estep(_PROGRAM, "gibbs"), ValueError, "inference must be one of"),
    (lambda: nesy.estep(_PROGRAM, "rejection")(None, _LOGITS, _LABELS),
     ValueError, "pass a PRNG key"),
    (lambda: nesy.em_step(nesy.estep(_PROGRAM), None, _LOGITS[:, :1], _LABELS),
     ValueError, r"logits must be \(B, 2, 10\)"),
    (lambda: nesy.log_z(_PROGRAM, _LOGITS.astype(jnp.int32), _LABELS), TypeError,
     "logits must be floating point"),
    (lambda: nesy.semantic_loss(_PROGRAM, _LOGITS, _LABELS[:, :1]), ValueError,
     r"labels must be \(B,\) \+ \(2,\)"),
    (lambda: nesy.reinforce_loss(_PROGRAM, jax.random.key(0), _LOGITS, _LABELS,
                                 num_samples=1), ValueError,
     "num_samples must be an int >= 2"),
    (lambda: nesy.em_loss(_LOGITS, nesy.Posterior(jnp.zeros((2, 2, 9)),
                                                  jnp.zeros(2), jnp.zeros(2))),
     ValueError, "must have the same .B, K, V. shape"),
    (lambda: _PROGRAM.marginals(jnp.zeros((2, 10)), jnp.zeros(2)), ValueError,
     r"label must be \(2,\) int digits"),
    # Concrete labels out of range: a digit 12 used to be clipped to 9 (or
    # dropped as infeasible), silently.
    (lambda: nesy.estep(_PROGRAM)(None, _LOGITS, _LABELS.at[1, 0].set(12)),
     ValueError, r"labels\[1\] = \[12, 0\] is out of range: label digits must"
     " lie in 0..9"),
    (lambda: nesy.semantic_loss(_PROGRAM, _LOGITS, _LABELS.at[0, 1].set(-1)),
     ValueError, r"labels\[0\] = \[0, -1\] is out of range"),
    (lambda: nesy.log_z(_PROGRAM, _LOGITS, _LABELS.at[0, 0].set(10)),
     ValueError, "is out of range: label digits must lie in 0..9"),
    (lambda: nesy.reinforce_loss(_PROGRAM, jax.random.key(0), _LOGITS,
                                 _LABELS.at[0, 0].set(10)), ValueError,
     "is out of range"),
    (lambda: _PROGRAM.marginals(jnp.zeros((2, 10)), jnp.array([12, 0])),
     ValueError, "label digits must lie in 0..9; got 12 at position 0"),
    (lambda: _PROGRAM.feasible(np.array([3, 10])), ValueError,
     "label digits must lie in 0..9"),
    (lambda: _PROGRAM.map_assignment(jnp.zeros((2, 10)), jnp.array([3, -2])),
     ValueError, "label digits must lie in 0..9"),
    (lambda: _PROGRAM.satisfied(jnp.array([12, 0]), jnp.array([2, 1])),
     ValueError, "z digits must lie in 0..9"),
    (lambda: _PROGRAM.satisfied(jnp.array([1.0, 2.0]), jnp.array([3, 0])),
     ValueError, r"z must be \(2,\) int digits"),
    (lambda: _PROGRAM.log_z(jnp.zeros((2, 10), jnp.int32), jnp.array([0, 0])),
     TypeError, "logp must be floating point"),
    (lambda: _TABLE.log_z(jnp.zeros((2, 10), jnp.int32), jnp.int32(0)),
     TypeError, "logp must be floating point"),
    (lambda: _TABLE.satisfied(jnp.array([0, 12]), jnp.int32(3)), ValueError,
     r"z values must lie in \[0, 10\)"),
    (lambda: _TABLE.marginals(jnp.zeros((2, 10)), jnp.float32(3)), ValueError,
     "label must be an int scalar"),
    # Programs and counts.
    (lambda: nesy.estep(5), TypeError, "program must be a NeSy program"),
    (lambda: nesy.log_z(object(), _LOGITS, _LABELS), TypeError,
     "lacks num_symbols"),
    (lambda: nesy.estep(_PROGRAM, "rejection", num_samples=True), ValueError,
     "num_samples must be an int >= 1"),
    (lambda: nesy.estep(_PROGRAM, "rejection", num_samples=2.0), ValueError,
     "num_samples must be an int >= 1"),
    (lambda: nesy.reinforce_loss(_PROGRAM, None, _LOGITS, _LABELS), ValueError,
     "pass a PRNG key"),
    # An empty batch: a mean over B = 0 examples used to be 0/0 = NaN.
    (lambda: nesy.semantic_loss(_PROGRAM, _LOGITS[:0], _LABELS[:0]),
     ValueError, "B >= 1"),
    (lambda: nesy.em_loss(_LOGITS[:0], nesy.Posterior(
        jnp.zeros((0, 2, 10)), jnp.zeros(0), jnp.zeros(0))), ValueError,
     "B >= 1"),
    (lambda: nesy.reinforce_loss(_PROGRAM, jax.random.key(0), _LOGITS[:0],
                                 _LABELS[:0]), ValueError, "B >= 1"),
    (lambda: nesy.em_loss(_LOGITS.astype(jnp.int32), nesy.Posterior(
        jnp.zeros((2, 2, 10)), jnp.zeros(2), jnp.zeros(2))), TypeError,
     "logits must be floating point"),
    (lambda: nesy.em_loss(_LOGITS, (jnp.zeros((2, 2, 10)), jnp.zeros(2),
                                    jnp.zeros(2))), TypeError,
     "posterior must be a Posterior"),
    # Host-side helpers: floats used to be truncated (3.5 -> 3, a digit
    # 3.7 -> 3); NaN and empty input ended in Python/numpy internals.
    (lambda: nesy.sum_to_digits(3.5, 1), TypeError, "total must be an int sum"),
    (lambda: nesy.sum_to_digits(float("nan"), 1), TypeError,
     "total must be an int sum"),
    (lambda: nesy.sum_to_digits([3, 4.5], 1), TypeError,
     "total must be an int sum"),
    (lambda: nesy.sum_to_digits(-1, 2), nesy.UnreachableSumError,
     "not a sum of two 2-digit numbers"),
    (lambda: nesy.sum_to_digits([[1, 2]], 1), ValueError,
     "total must be an int or a 1-D list of ints"),
    (lambda: nesy.digits_to_int([]), ValueError, "non-empty 1-D sequence"),
    (lambda: nesy.digits_to_int([3.7]), TypeError, "digits must be ints"),
    (lambda: nesy.digits_to_int([float("nan")]), TypeError,
     "digits must be ints"),
    (lambda: nesy.digits_to_int([1, -1]), ValueError,
     "digits must lie in 0..9; got -1"),
    (lambda: nesy.addition_examples(np.arange(10), 4, 1, seed=-1), ValueError,
     "seed must be an int >= 0"),
    (lambda: nesy.addition_examples(np.arange(10), 2.5, 1, seed=0), ValueError,
     "num_sums and num_digits must be >= 1"),
    (lambda: nesy.addition_examples(np.arange(10), 4, 0, seed=0), ValueError,
     "num_digits must be an int >= 1"),
    (lambda: nesy.addition_examples(np.array([1.0, np.nan]), 4, 1, seed=0),
     ValueError, "digit_labels must be a non-empty 1-D int array"),
    (lambda: nesy.addition_examples(np.zeros(0, np.int32), 4, 1, seed=0),
     ValueError, "digit_labels must be a non-empty 1-D int array"),
    (lambda: nesy.DigitAddition(True), ValueError,
     "num_digits must be an int >= 1"),
    (lambda: nesy.addition_program(True), ValueError,
     "num_digits must be an int >= 1"),
    (lambda: nesy.enumerate_program(lambda z: 0, True, 2), ValueError,
     "need num_symbols >= 1 and num_values >= 2"),
    # A NaN max_worlds compared False with every size: no limit at all.
    (lambda: nesy.enumerate_program(lambda z: 0, 2, 2,
                                    max_worlds=float("nan")), ValueError,
     "max_worlds must be an int >= 1"),
    (lambda: nesy.enumerate_program(lambda w: np.full(len(w), np.nan), 2, 2,
                                    vectorized=True), ValueError,
     "phi must give one int label per world"),
    # Labels are int32 on the device: 2**40 used to wrap to another label.
    (lambda: nesy.enumerate_program(lambda z: 2**40 + z[0], 1, 2), ValueError,
     "phi's labels must fit int32"),
    (lambda: nesy.EnumeratedProgram(np.zeros((4, 2)), np.zeros(4, np.int32),
                                    2), TypeError,
     "worlds and world_labels must be int arrays"),
    (lambda: nesy.EnumeratedProgram(np.zeros((4, 2), np.int32),
                                    np.zeros(4, np.int32), 2), ValueError,
     "itertools.product order"),
    (lambda: nesy.EnumeratedProgram(np.zeros((1, 2), np.int32),
                                    np.zeros(1, np.int32), 1), ValueError,
     "need num_symbols >= 1 and num_values >= 2"),
    # Training (jaxpapers.nesy._training).
    (lambda: nesy.make_train_step("em_gibbs", _PROGRAM, _OPT), ValueError,
     "method must be one of"),
    (lambda: nesy.make_train_step("em_exact", 5, _OPT), TypeError,
     "program must be a NeSy program"),
    (lambda: nesy.make_train_step("em_exact", _PROGRAM, 0.1), TypeError,
     "optimizer must be an optax GradientTransformation"),
    (lambda: nesy.make_train_step("em_exact", _PROGRAM, _OPT, m_steps=0),
     ValueError, "m_steps must be an int >= 1"),
    (lambda: nesy.make_train_step("reinforce", _PROGRAM, _OPT,
                                  reinforce_samples=1), ValueError,
     "reinforce_samples must be an int >= 2"),
    (lambda: nesy.init_state(jax.random.key(0), "adam"), TypeError,
     "optimizer must be an optax GradientTransformation"),
    (lambda: nesy.train_epoch(_STEP, _STATE, jax.random.key(0), _IMAGES,
                              _PROBLEMS, _PROBLEMS, batch_size=7),
     ValueError, r"batch_size must be an int in \[1, 6\]"),
    (lambda: nesy.train_epoch(_STEP, _STATE, jax.random.key(0), _IMAGES,
                              _PROBLEMS, jnp.zeros((5, 2), jnp.int32),
                              batch_size=2), ValueError,
     r"problems must be \(S, K\) and labels \(S, ...\)"),
    (lambda: nesy.train_epoch(_STEP, _STATE, jax.random.key(0), _IMAGES,
                              _PROBLEMS.astype(jnp.float32),
                              jnp.zeros((6, 2), jnp.int32), batch_size=2),
     TypeError, "problems must be int indices"),
    (lambda: nesy.addition_accuracy(_PROGRAM, _STATE.params, _IMAGES,
                                    _PROBLEMS, jnp.zeros((6, 2), jnp.int32),
                                    jnp.zeros(4, jnp.int32)), ValueError,
     r"digits \(5,\) for 5 images"),
    (lambda: nesy.addition_batch(np.zeros((4, 3)), np.arange(5), 2, 1,
                                 seed=0), ValueError,
     "one of digit_labels .n,. per image"),
    (lambda: nesy.step_costs(np.zeros((10, 4)), np.arange(10), num_digits=(),
                             enumerated=(3,), optimizer=_OPT), ValueError,
     r"enumerated must be an int in \[1, 2\]"),
    (lambda: nesy.step_costs(np.zeros((10, 4)), np.arange(10), num_digits=(),
                             optimizer=_OPT), ValueError, "name no N to time"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_valid_edge_calls_are_not_refused():
  """The checks above refuse nothing valid: numpy ints, empty lists, big sums."""
  assert nesy.sum_to_digits([], 2).shape == (0, 3)
  assert nesy.sum_to_digits(np.int64(18), 1).tolist() == [8, 1]
  assert nesy.sum_to_digits(jnp.int32(7), 1).tolist() == [7, 0]
  assert nesy.digits_to_int(np.array([3, 2], np.uint8)) == 23
  assert callable(nesy.estep(_PROGRAM, "rejection", num_samples=np.int64(3)))
  indices, labels = nesy.addition_examples(np.arange(10), np.int64(2), 1,
                                           seed=np.int64(0))
  assert indices.shape == (2, 2) and labels.shape == (2, 2)
