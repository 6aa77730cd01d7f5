"""The heavy-decoder model: parameter counts, valid decoding, partial paths, training."""

from flax import nnx
import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import routing
from jaxpapers.routing import _imitation as imitation
from jaxpapers.routing import _lehd as lehd


def _model(width=16, layers=1, *, abstract=False, **kwargs):
  config = lehd.HeavyDecoderConfig(width=width, decoder_layers=layers,
                                   head_width=8, **kwargs)
  build = lambda: lehd.HeavyDecoder(config, rngs=nnx.Rngs(0))
  return nnx.eval_shape(build) if abstract else build()


@pytest.mark.parametrize("width,layers,gated,encoder", [
    (16, 1, False, 0), (24, 3, False, 0), (16, 2, True, 0), (16, 2, False, 1)])
def test_parameter_counts_follow_the_formula(width, layers, gated, encoder):
  model = _model(width, layers, abstract=True, gated=gated,
                 encoder_layers=encoder)
  per_layer = 12 * width ** 2 + 9 * width + 2 + (width ** 2 if gated else 0)
  assert lehd.layer_parameter_count(width, gated) == per_layer
  assert lehd.decoder_parameter_count(model.config) == layers * per_layer
  count = lambda module: lehd.parameter_count(module)
  assert sum(count(layer) for layer in model.decoder) == layers * per_layer
  # The rest: embedding (3D), W_f and W_c (2D^2 + 2D), score head (D + 1),
  # and the encoder's layers.
  outside = 3 * width + 2 * width ** 2 + 2 * width + width + 1
  assert count(model) == (layers + encoder) * per_layer + outside


@pytest.mark.parametrize("width,layers", [(48, 2), (64, 1), (64, 4), (96, 2),
                                          (128, 2), (64, 8)])
def test_decoder_size_is_about_twelve_d_squared_l(width, layers):
  """The spec's grid, ~ 12 D^2 L to within 2% (the biases and ReZero scalars)."""
  config = lehd.HeavyDecoderConfig(width=width, decoder_layers=layers)
  approx = 12 * width ** 2 * layers
  assert approx <= lehd.decoder_parameter_count(config) <= 1.02 * approx


@pytest.mark.parametrize("kwargs,match", [
    (dict(width=20, head_width=8), "multiple of head_width"),
    (dict(decoder_layers=0), "decoder_layers"),
    (dict(encoder_layers=-1), "encoder_layers"),
    (dict(width=1.5), "width")])
def test_config_rejects_bad_sizes(kwargs, match):
  with pytest.raises(ValueError, match=match):
    lehd.HeavyDecoderConfig(**kwargs)


def test_rezero_layers_start_as_the_identity():
  """With every ReZero scalar 0 the logits are the score head on E (closed form)."""
  model = _model(16, 2)
  coords = routing.random_instances(0, 3, 6)
  unvisited = np.ones((3, 6), bool)
  unvisited[:, :2] = False
  graphdef, params = nnx.split(model, nnx.Param)

  @jax.jit
  def both(params):
    model = nnx.merge(graphdef, params)
    return (model(coords, jnp.zeros(3, jnp.int32), jnp.ones(3, jnp.int32),
                  unvisited), model.score(model.embedding(coords))[..., 0])

  logits, expected = both(params)
  np.testing.assert_allclose(logits[:, 2:], expected[:, 2:], rtol=1e-5)
  assert np.all(np.isneginf(np.asarray(logits[:, :2])))



def _decoders(model):
  """Jitted greedy and best-of-3 sampled decoding (one compilation per shape)."""
  graphdef = nnx.graphdef(model)

  @jax.jit
  def decode(params, coords, key):
    model = nnx.merge(graphdef, params)
    return (routing.greedy_tours(model, coords),
            routing.sample_tours(model, coords, key, num_samples=3))

  return decode


_DECODE = _decoders(_model(16, 1))


@hypothesis.given(num_cities=st.sampled_from([3, 8]),
                  seed=st.integers(0, 10_000),
                  scales=st.tuples(st.floats(-3, 3), st.floats(-3, 3)))
@hypothesis.settings(max_examples=15, deadline=None)
def test_decoding_always_returns_a_permutation(num_cities, seed, scales):
  model = _model(16, 1)
  # Random ReZero scalars and weights, so that the layers matter to the choices.
  model = lehd.HeavyDecoder(model.config, rngs=nnx.Rngs(seed))
  for layer in model.decoder:
    layer.attention_scale[...] = jnp.asarray(scales[0], jnp.float32)
    layer.ff_scale[...] = jnp.asarray(scales[1], jnp.float32)
  coords = routing.random_instances(seed, 4, num_cities)
  for tours in _DECODE(nnx.state(model, nnx.Param), coords,
                       jax.random.key(seed)):
    assert tours.shape == (4, num_cities) and tours.dtype == jnp.int32
    assert np.all(np.asarray(tours)[:, 0] == 0)
    np.testing.assert_array_equal(np.sort(tours, axis=1),
                                  np.tile(np.arange(num_cities), (4, 1)))


def test_cold_sampling_is_greedy_and_best_of_k_is_no_longer():
  model = _model(16, 1)
  graphdef, params = nnx.split(model, nnx.Param)
  coords = routing.random_instances(5, 8, 7)
  key = jax.random.key(1)

  @jax.jit
  def decode(params):
    model = nnx.merge(graphdef, params)
    sample = lambda k, temperature=1.0: routing.sample_tours(
        model, coords, key, num_samples=k, temperature=temperature)
    return (routing.greedy_tours(model, coords), sample(1, 1e-6), sample(1),
            sample(8))

  greedy, cold, one, many = decode(params)
  np.testing.assert_array_equal(cold, greedy)
  # The first of the 8 samples is drawn with the same keys as the single one.
  assert np.all(np.asarray(routing.tour_length(coords, many))
                <= np.asarray(routing.tour_length(coords, one)) + 1e-6)
  with pytest.raises(ValueError, match="num_samples"):
    routing.sample_tours(model, coords, key, num_samples=0)
  with pytest.raises(ValueError, match="temperature"):
    routing.sample_tours(model, coords, key, num_samples=2, temperature=0.0)


def test_greedy_decoding_works_under_jit_and_names_small_instances():
  model = _model(16, 1)
  graphdef, params = nnx.split(model, nnx.Param)
  coords = routing.random_instances(3, 2, 5)
  jitted = jax.jit(lambda p, c: routing.greedy_tours(nnx.merge(graphdef, p), c))
  np.testing.assert_array_equal(jitted(params, coords),
                                routing.greedy_tours(model, coords))
  with pytest.raises(ValueError, match=">= 3"):
    routing.greedy_tours(model, coords[:, :2])


@pytest.mark.parametrize("num_cities", [3, 8])
def test_partial_paths_are_sub_paths_of_the_tours(num_cities):
  rng = np.random.default_rng(num_cities)
  tours = np.stack([rng.permutation(num_cities) for _ in range(200)])
  paths = jax.jit(routing.partial_paths)(jax.random.key(0), tours)
  lengths = set()
  for b, tour in enumerate(tours.tolist()):
    cycle = tour + tour
    current, target = int(paths.current_B[b]), int(paths.target_B[b])
    destination = int(paths.destination_B[b])
    between = set(np.flatnonzero(np.asarray(paths.unvisited_BxN[b])).tolist())
    position = tour.index(current)
    # Forwards or backwards along the tour: target, then the rest, then dest.
    found = False
    for direction in (1, -1):
      walk = [cycle[(position + direction * k) % num_cities]
              for k in range(num_cities + 1)]
      ell = len(between) + 2
      if (walk[1] == target and set(walk[1:ell - 1]) == between
          and walk[ell - 1] == destination):
        found = True
    assert found, (tour, current, target, destination, between)
    assert target in between and current not in between
    lengths.add(len(between) + 2)
  assert lengths == set(range(4, num_cities + 2))  # l ~ U{4, N + 1}


def test_partial_paths_name_bad_tours():
  with pytest.raises(routing.TourError, match="tours"):
    routing.partial_paths(jax.random.key(0), np.array([[0, 1, 1, 2]]))
  with pytest.raises(ValueError, match="min_length"):
    routing.partial_paths(jax.random.key(0), np.array([[0, 1, 2, 3]]),
                          min_length=2)


def test_imitation_loss_is_the_cross_entropy_of_the_target():
  model = _model(16, 1)
  for layer in model.decoder:
    layer.attention_scale[...] = jnp.asarray(0.5)
  coords = routing.random_instances(1, 16, 6)
  tours = routing.held_karp(coords)[0]
  paths = routing.partial_paths(jax.random.key(2), tours)
  logits = np.asarray(jax.jit(model.__call__)(
      coords, paths.destination_B, paths.current_B, paths.unvisited_BxN),
      np.float64)
  reference = []
  for b in range(16):
    valid = logits[b][np.asarray(paths.unvisited_BxN[b])]
    log_z = np.log(np.sum(np.exp(valid - valid.max()))) + valid.max()
    reference.append(log_z - logits[b, int(paths.target_B[b])])
  graphdef, params = nnx.split(model, nnx.Param)
  loss = jax.jit(lambda p: routing.imitation_loss(nnx.merge(graphdef, p),
                                                  coords, paths))(params)
  np.testing.assert_allclose(loss, np.mean(reference), rtol=1e-5)


@pytest.mark.slow  # compile-bound (20-40 s on 2 cores); CI runs -m slow
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_training_learns_and_resumes_exactly():
  """Two 6-step calls equal one 12-step call (keys fold in the step); the loss falls."""
  model = _model(8, 1)
  graphdef, params = nnx.split(model, nnx.Param)
  tx = imitation.optimizer(1e-2, steps_per_epoch=4)
  coords = routing.random_instances(0, 64, 7)
  tours = routing.held_karp(coords)[0]
  key = jax.random.key(0)
  kwargs = dict(graphdef=graphdef, tx=tx, batch_size=32)
  state = imitation.TrainState(params, tx.init(params))
  straight, losses = imitation.train_steps(state, coords, tours, key,
                                           jnp.asarray(0), num_steps=12,
                                           **kwargs)
  half, first = imitation.train_steps(state, coords, tours, key,
                                      jnp.asarray(0), num_steps=6, **kwargs)
  resumed, second = imitation.train_steps(half, coords, tours, key,
                                          jnp.asarray(6), num_steps=6, **kwargs)
  np.testing.assert_allclose(np.concatenate([first, second]), losses,
                             rtol=1e-5)
  # train_blocks: the same two 6-step calls (the compiled scan reused), so
  # the very same numbers.
  blocks, block_losses = imitation.train_blocks(state, coords, tours, key, 0,
                                                12, block_steps=6, **kwargs)
  np.testing.assert_array_equal(block_losses, np.concatenate([first, second]))
  for a, b in zip(jax.tree.leaves(blocks), jax.tree.leaves(resumed)):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  fixed = routing.partial_paths(jax.random.key(9), tours)
  held_loss = jax.jit(lambda p: routing.imitation_loss(
      nnx.merge(graphdef, p), coords, fixed))
  # 12 small steps: a drop of 0.5% is far outside float rounding.
  assert held_loss(straight.params) < 0.995 * held_loss(params)
  assert all(np.all(np.isfinite(p)) for p in jax.tree.leaves(straight.params))


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_step_flops_are_xla_counts_that_grow_with_the_batch():
  graphdef, params = nnx.split(_model(8, 1), nnx.Param)
  tx = imitation.optimizer(1e-2, steps_per_epoch=4)
  state = imitation.TrainState(params, tx.init(params))
  coords = routing.random_instances(0, 16, 7)
  tours = jnp.tile(jnp.arange(7, dtype=jnp.int32), (16, 1))
  flops = {b: imitation.train_step_flops(state, coords, tours, graphdef=graphdef,
                                         tx=tx, batch_size=b) for b in (8, 16)}
  assert isinstance(flops[8], float) and flops[8] > 0
  # The forward and backward passes are linear in the batch; the optimizer
  # update (a few hundred parameters) is not.
  assert 1.5 * flops[8] < flops[16] < 2 * flops[8]


def test_optimizer_rejects_bad_schedules():
  with pytest.raises(ValueError, match="steps_per_epoch"):
    imitation.optimizer(1e-3, steps_per_epoch=0)
  with pytest.raises(ValueError, match="decay"):
    imitation.optimizer(1e-3, steps_per_epoch=1, decay=1.5)
