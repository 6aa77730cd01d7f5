"""jaxpapers.nesy: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import nesy

_PROGRAM = nesy.DigitAddition(1)
_LOGITS = jnp.zeros((2, 2, 10))
_LABELS = jnp.zeros((2, 2), jnp.int32)

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
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
