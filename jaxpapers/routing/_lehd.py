r"""A heavy-decoder construction model for the TSP (LEHD-style), in flax nnx.

The model builds a tour one city at a time. Cities are embedded linearly,
:math:`E = X W_e + b_e \in \mathbb{R}^{N \times D}`, optionally refined by
``encoder_layers`` layers (0 by default: decoder-only; 1 is LEHD's light
encoder). Each construction step feeds the decoder the tokens

.. math:: [E_{\mathrm{dest}} W_f,\; E_{\mathrm{cur}} W_c,\; E_u \;(u \in U)],

with U the unvisited cities (other cities are masked out of attention), runs
``decoder_layers`` layers of width D and scores each U-token linearly; a
softmax over U gives the next city. Every layer has two sublayers with
ReZero residuals and no normalisation, :math:`x \leftarrow x + a\,f(x)` with
a learnable scalar :math:`a` starting at 0: multi-head attention (head width
``head_width``; with ``gated=True`` its output is multiplied by
:math:`\sigma(x W_g)`) and a feed-forward D -> 4D (ReLU) -> D. A decoder layer
has :math:`12 D^2 + 9 D + 2` parameters (:math:`+ D^2` gated), so the
decoder has :math:`\approx 12 D^2 L` (:func:`decoder_parameter_count`).

Training is supervised from (near-)optimal tours on partial solutions
(:func:`partial_paths`, :func:`imitation_loss`); decoding is greedy
(:func:`greedy_tours`) or best-of-k sampling (:func:`sample_tours`), a
``lax.scan`` over steps with a mask of visited cities, so that every output
is a permutation.

Source status: the embedding, the [destination, current, unvisited] tokens
re-embedded at every step, the heavy decoder without normalisation and the
supervised partial-solution scheme follow LEHD (Luo et al., 2023, Sec. 4 and
its public code); the decoder-only default, ReZero and the depth/width grid
follow the scaling study (Luo et al., 2026, abstract and a secondary
summary). **Reconstruction** (ours): the gating form :math:`\sigma(x W_g)`,
our restatement of LEHD's sampling of partial paths (``docs/routing.md``),
and the scale (TSP10/20, D <= 128).

References:
  F. Luo, X. Lin, F. Liu, Q. Zhang, Z. Wang, `Neural combinatorial
  optimization with heavy decoder: toward large scale generalization
  <https://arxiv.org/abs/2310.07985>`_, NeurIPS 2023 (LEHD).
  Q. Luo, F. Luo, K. Li, Z. Wang, `Efficient decoder scaling strategy for
  neural routing solvers <https://arxiv.org/abs/2603.00430>`_, 2026.
  T. Bachlechner et al., `ReZero is all you need
  <https://arxiv.org/abs/2003.04887>`_, UAI 2021.
"""

import dataclasses
from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import models
from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.routing import _tsp as tsp

FF_MULTIPLE = 4
# Tokens ahead of the cities: the destination and the current city.
_CONTEXT_TOKENS = 2


def _gather_cities(x):
  """``x`` with the sharding of its axes after the leading (batch) one gathered.

  The decoder reads cities at per-instance indices and concatenates the
  context tokens ahead of them along the city axis; Explicit mesh axes do
  neither on a sharded city axis, so only the batch stays sharded.
  """
  spec = tree.explicit_spec(x)
  return x if spec is None else tree.gather_mesh_axes(
      x, tree.spec_axes(jax.P(*spec[1:])))


@dataclasses.dataclass(frozen=True)
class HeavyDecoderConfig:
  """Sizes of :class:`HeavyDecoder` (all static).

  Attributes:
    width: D, the embedding width (a multiple of ``head_width``).
    decoder_layers: L, the decoder's depth (>= 1).
    head_width: width of one attention head (heads = D / head_width).
    encoder_layers: layers over all cities before decoding (0: decoder-only).
    gated: multiply the attention output by a sigmoid gate.
  """

  width: int = 64
  decoder_layers: int = 2
  head_width: int = 16
  encoder_layers: int = 0
  gated: bool = False

  def __post_init__(self):
    for name, low in (("width", 1), ("decoder_layers", 1), ("head_width", 1),
                      ("encoder_layers", 0)):
      check_int(name, getattr(self, name), low)
    if not isinstance(self.gated, bool):
      raise ValueError(f"gated must be a bool; got {self.gated!r}.")
    if self.width % self.head_width:
      raise ValueError(f"width={self.width} must be a multiple of"
                       f" head_width={self.head_width}.")

  @property
  def num_heads(self) -> int:
    return self.width // self.head_width


class ReZeroLayer(nnx.Module):
  """Attention then feed-forward, each as ``x + a * sublayer(x)`` with ``a = 0`` at init."""

  def __init__(self, config: HeavyDecoderConfig, *, rngs: nnx.Rngs):
    _check_config(config)
    width = config.width
    self.attention = nnx.MultiHeadAttention(config.num_heads, width,
                                            decode=False, rngs=rngs)
    self.gate = (nnx.Linear(width, width, use_bias=False, rngs=rngs)
                 if config.gated else None)
    self.up = nnx.Linear(width, FF_MULTIPLE * width, rngs=rngs)
    self.down = nnx.Linear(FF_MULTIPLE * width, width, rngs=rngs)
    self.attention_scale = nnx.Param(jnp.zeros((), jnp.float32))
    self.ff_scale = nnx.Param(jnp.zeros((), jnp.float32))

  @models.fsdp_gathered
  def __call__(self, x_BxTxD: jax.Array, valid_BxT: jax.Array) -> jax.Array:
    spec = tree.explicit_spec(x_BxTxD)
    if spec is not None:
      # The mask broadcasts over the attention logits only sharded like x.
      valid_BxT = jax.sharding.reshard(valid_BxT, jax.P(*spec[:2]))
    # Masked tokens are invisible as keys; their own rows are never read.
    mask_Bx1x1xT = valid_BxT[:, None, None, :]
    attended_BxTxD = self.attention(x_BxTxD, mask=mask_Bx1x1xT)
    if self.gate is not None:
      attended_BxTxD = attended_BxTxD * jax.nn.sigmoid(self.gate(x_BxTxD))
    x_BxTxD = x_BxTxD + self.attention_scale[...] * attended_BxTxD
    # A sharded feed-forward width (tensor parallelism) is summed over.
    ff_BxTxD = self.down(jax.nn.relu(self.up(x_BxTxD)),
                         out_sharding=tree.contraction_spec(x_BxTxD))
    return x_BxTxD + self.ff_scale[...] * ff_BxTxD


class HeavyDecoder(nnx.Module):
  """``model(coords, destination, current, unvisited) -> logits_BxN`` over the next city.

  Logits of cities outside ``unvisited`` are ``-inf``.

  Example:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> model = HeavyDecoder(HeavyDecoderConfig(width=32, decoder_layers=1),
    ...                      rngs=nnx.Rngs(0))
    >>> coords = tsp.random_instances(0, 2, 5)
    >>> tours = greedy_tours(model, coords)
    >>> sorted(tours[0].tolist())
    [0, 1, 2, 3, 4]

  Example (flax nnx training step), imitating tours on their partial paths:
    >>> import jax, optax
    >>> from jaxpapers import optim
    >>> from jaxpapers.routing import nearest_neighbour
    >>> tours = nearest_neighbour(coords)  # (near-)optimal ones in practice
    >>> paths = jax.jit(partial_paths)(jax.random.key(1), tours)
    >>> loss = lambda model: imitation_loss(model, coords, paths)
    >>> optimizer = nnx.Optimizer(
    ...     model, optim.ema_nesterov(optax.sgd(0.02, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(model)
    ...   optimizer.update(model, grads)
    ...   return value
    >>> losses = [train_step(model, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, config: HeavyDecoderConfig, *, rngs: nnx.Rngs):
    _check_config(config)
    self.config = config
    width = config.width
    self.embedding = nnx.Linear(2, width, rngs=rngs)
    self.encoder = nnx.List([ReZeroLayer(config, rngs=rngs)
                             for _ in range(config.encoder_layers)])
    self.destination = nnx.Linear(width, width, rngs=rngs)
    self.current = nnx.Linear(width, width, rngs=rngs)
    self.decoder = nnx.List([ReZeroLayer(config, rngs=rngs)
                             for _ in range(config.decoder_layers)])
    self.score = nnx.Linear(width, 1, rngs=rngs)

  @models.fsdp_gathered
  def embed(self, coords_BxNx2: jax.Array) -> jax.Array:
    """City embeddings ``E_BxNxD`` (once per instance; the encoder sees every city)."""
    tsp.check_coords(coords_BxNx2)
    e_BxNxD = self.embedding(_gather_cities(coords_BxNx2))
    every_BxN = jnp.ones(e_BxNxD.shape[:2], jnp.bool_)
    for layer in self.encoder:
      e_BxNxD = layer(e_BxNxD, every_BxN)
    return e_BxNxD

  @models.fsdp_gathered
  def step_logits(self, e_BxNxD: jax.Array, destination_B: jax.Array,
                  current_B: jax.Array, unvisited_BxN: jax.Array) -> jax.Array:
    """One construction step's logits over the cities, ``-inf`` off ``unvisited``.

    ``destination_B`` and ``current_B`` are int ``[B]`` city ids,
    ``unvisited_BxN`` a bool ``[B, N]`` mask (``ValueError`` otherwise, and
    for concrete ids outside ``[0, N)``). Traced, a row with an id outside
    ``[0, N)`` has NaN logits on its unvisited cities (-1 would otherwise be
    read as the last city).
    """
    batch, n = np.shape(e_BxNxD)[:2]
    _check_step(batch, n, destination_B, current_B, unvisited_BxN)
    e_BxNxD, unvisited_BxN = _gather_cities(e_BxNxD), _gather_cities(
        unvisited_BxN)
    take = lambda city_B: jnp.take_along_axis(
        e_BxNxD, city_B[:, None, None], axis=1)
    # Explicit mesh axes concatenate only alike-sharded arrays: the context
    # tokens take the cities' sharding.
    context = [tree.reshard_like(project(take(city_B)), e_BxNxD)
               for project, city_B in ((self.destination, destination_B),
                                       (self.current, current_B))]
    tokens_BxTxD = jnp.concatenate([*context, e_BxNxD], axis=1)
    context_BxC = jnp.ones((unvisited_BxN.shape[0], _CONTEXT_TOKENS), jnp.bool_)
    # Explicit mesh axes concatenate only alike-sharded arrays.
    valid_BxT = jnp.concatenate(
        [tree.reshard_like(context_BxC, unvisited_BxN), unvisited_BxN], axis=1)
    for layer in self.decoder:
      tokens_BxTxD = layer(tokens_BxTxD, valid_BxT)
    scores_BxN = self.score(tokens_BxTxD[:, _CONTEXT_TOKENS:])[..., 0]
    ids_ok_B = ((destination_B >= 0) & (destination_B < n)
                & (current_B >= 0) & (current_B < n))
    scores_BxN = jnp.where(ids_ok_B[:, None], scores_BxN, jnp.nan)
    return jnp.where(unvisited_BxN, scores_BxN, -jnp.inf)

  def __call__(self, coords_BxNx2, destination_B, current_B, unvisited_BxN):
    return self.step_logits(self.embed(coords_BxNx2), destination_B, current_B,
                            unvisited_BxN)


def _check_config(config) -> None:
  if not isinstance(config, HeavyDecoderConfig):
    raise TypeError(f"config must be a HeavyDecoderConfig; got"
                    f" {type(config).__name__}.")


def _check_model(model) -> None:
  if not isinstance(model, HeavyDecoder):
    raise TypeError(f"model must be a HeavyDecoder (nnx.merge the graphdef"
                    f" and params first); got {type(model).__name__}.")


def _check_ids(ids, name: str, shape: tuple[int, ...], n: int) -> None:
  """Raises unless ``ids`` is an int array of ``shape`` (concrete: in ``[0, n)``)."""
  dtype = jnp.result_type(ids)
  if np.shape(ids) != shape or not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"{name} must be an int array of shape {list(shape)};"
                     f" got {dtype}{list(np.shape(ids))}.")
  if not isinstance(ids, jax.core.Tracer):
    values = np.asarray(ids)
    bad = (values < 0) | (values >= n)
    if bad.any():
      raise ValueError(f"{name} must hold city ids in [0, {n}); got"
                       f" {values[bad][:3].tolist()} ({int(bad.sum())} such"
                       " ids).")


def _check_step(batch, n, destination_B, current_B, unvisited_BxN) -> None:
  _check_ids(destination_B, "destination_B", (batch,), n)
  _check_ids(current_B, "current_B", (batch,), n)
  if (np.shape(unvisited_BxN) != (batch, n)
      or jnp.result_type(unvisited_BxN) != jnp.bool_):
    raise ValueError(f"unvisited_BxN must be a bool array of shape"
                     f" {[batch, n]}; got {jnp.result_type(unvisited_BxN)}"
                     f"{list(np.shape(unvisited_BxN))}.")


def layer_parameter_count(width: int, gated: bool = False) -> int:
  """Parameters of one :class:`ReZeroLayer`: ``12 D^2 + 9 D + 2`` (``+ D^2`` gated).

  Attention: q, k, v and output projections with biases (4D^2 + 4D); the
  feed-forward D -> 4D -> D (8D^2 + 5D); two ReZero scalars.
  ``width`` must be an int >= 1 and ``gated`` a bool (``ValueError``).
  """
  check_int("width", width, 1)
  if not isinstance(gated, bool):
    raise ValueError(f"gated must be a bool; got {gated!r}.")
  return 12 * width ** 2 + 9 * width + 2 + (width ** 2 if gated else 0)


def decoder_parameter_count(config: HeavyDecoderConfig) -> int:
  """Parameters of the decoder's layers, ``L * layer_parameter_count(D)`` (~ 12 D^2 L).

  ``TypeError`` unless ``config`` is a :class:`HeavyDecoderConfig`.
  """
  _check_config(config)
  return config.decoder_layers * layer_parameter_count(config.width,
                                                       config.gated)


def parameter_count(model: nnx.Module) -> int:
  """Every parameter of ``model`` (the embedding, W_f, W_c and the score head too).

  ``TypeError`` unless ``model`` is an ``nnx.Module``.
  """
  if not isinstance(model, nnx.Module):
    raise TypeError(f"model must be an nnx.Module; got {type(model).__name__}.")
  return sum(int(np.prod(p.shape))
             for p in jax.tree.leaves(nnx.state(model, nnx.Param)))


def greedy_tours(model: HeavyDecoder, coords_BxNx2: jax.Array) -> jax.Array:
  """Greedy construction from city 0 back to city 0: ``[B, N]`` int32 permutations.

  Raises ``TypeError`` for a ``model`` that is not a :class:`HeavyDecoder`
  and ``ValueError`` for coordinates that are not a real ``[B, N, 2]`` array
  (or, concrete, not finite). Traced non-finite coordinates still give
  permutations, but their :func:`~jaxpapers.routing.tour_length` is NaN.
  """
  _check_model(model)
  return _construct(model, coords_BxNx2, None, 1.0)


def sample_tours(model: HeavyDecoder, coords_BxNx2: jax.Array, key: jax.Array,
                 *, num_samples: int, temperature: float = 1.0) -> jax.Array:
  """The shortest of ``num_samples`` tours sampled from the model's softmax.

  Each step draws the next city from ``softmax(logits / temperature)`` over
  the unvisited cities; returns ``[B, N]`` int32 permutations.

  Raises:
    TypeError: ``model`` is not a :class:`HeavyDecoder`, or ``temperature``
      is traced (it must be a concrete number).
    ValueError: ``num_samples`` is not an int >= 1, ``temperature`` not a
      finite number > 0, or the coordinates not a real ``[B, N, 2]`` array
      (concrete: finite; traced non-finite ones give tours of NaN length,
      as in :func:`greedy_tours`).
  """
  _check_model(model)
  check_int("num_samples", num_samples, 1)
  check_real("temperature", temperature, low=0.0, low_open=True)
  batch = np.shape(coords_BxNx2)[0]
  # Tiling a sharded batch, and reading the samples back per instance, have
  # no sharding on Explicit axes: sample on replicated instances and give
  # the tours the instances' batch sharding back.
  spec = tree.explicit_spec(coords_BxNx2)
  coords_BxNx2 = tree.gather_explicit(coords_BxNx2)[0]
  coords_SBxNx2 = jnp.tile(coords_BxNx2, (num_samples, 1, 1))
  tours_SBxN = _construct(model, coords_SBxNx2, key, temperature)
  lengths_SxB = tsp.tour_length(coords_SBxNx2, tours_SBxN).reshape(
      num_samples, batch)
  best_B = jnp.argmin(lengths_SxB, axis=0)
  tours_SxBxN = tours_SBxN.reshape(num_samples, batch, -1)
  best_BxN = jnp.take_along_axis(tours_SxBxN, best_B[None, :, None], axis=0)[0]
  return best_BxN if spec is None else jax.sharding.reshard(
      best_BxN, jax.P(*spec[:2]))


def _construct(model, coords_BxNx2, key, temperature):
  tsp.check_coords(coords_BxNx2)
  batch, n = np.shape(coords_BxNx2)[:2]
  coords_BxNx2 = _gather_cities(coords_BxNx2)
  e_BxNxD = model.embed(coords_BxNx2)
  # Like the instances' batch sharding (Explicit axes concatenate alike only).
  start_B = jnp.zeros_like(coords_BxNx2[:, 0, 0], dtype=jnp.int32)
  cities_N = jnp.arange(n, dtype=jnp.int32)
  keys = (jnp.zeros((n - 1,), jnp.uint32) if key is None
          else jax.random.split(key, n - 1))

  def step(carry, step_key):
    current_B, unvisited_BxN = carry
    logits_BxN = model.step_logits(e_BxNxD, start_B, current_B, unvisited_BxN)
    if key is None:
      next_B = jnp.argmax(logits_BxN, axis=-1).astype(jnp.int32)
    else:
      next_B = jax.random.categorical(
          step_key, logits_BxN / temperature, axis=-1).astype(jnp.int32)
    unvisited_BxN = unvisited_BxN & (cities_N[None, :] != next_B[:, None])
    return (next_B, unvisited_BxN), next_B

  # Built from start_B, the scan's carry keeps the instances' sharding.
  unvisited_BxN = cities_N[None, :] != start_B[:, None]
  _, visited_SxB = jax.lax.scan(step, (start_B, unvisited_BxN), keys)
  return jnp.concatenate([start_B[:, None], visited_SxB.T], axis=1)


class PartialPaths(NamedTuple):
  """Training examples: complete a path ``current -> unvisited -> destination``.

  Attributes:
    destination_B: the path's last city.
    current_B: its first city.
    unvisited_BxN: the cities strictly between (the candidates).
    target_B: the label, the path's second city.
  """

  destination_B: jax.Array
  current_B: jax.Array
  unvisited_BxN: jax.Array
  target_B: jax.Array


def partial_paths(key: jax.Array, tours_BxN: jax.Array,
                  min_length: int = 4) -> PartialPaths:
  r"""Random sub-paths of (near-)optimal tours, LEHD's supervised examples (our restatement).

  Per tour: a random start position and direction, then the path
  :math:`v_0 .. v_{\ell-1}` of the next :math:`\ell \sim U\{m, N+1\}`
  positions (cyclically; :math:`\ell = N+1` closes the tour, so that
  destination = current as in the first decoding step). Cities off the
  path do not exist for the example: an optimal tour's sub-path is an
  optimal path through its own cities, so :math:`v_1` is the label.

  Args:
    key: PRNG key.
    tours_BxN: tours (permutations).
    min_length: m, the shortest path drawn (>= 3: one candidate at least).

  Raises:
    TourError: ``tours_BxN`` is not ``[B, N]`` integers, or (concrete) a row
      is not a permutation. Traced, such a row gives an example without
      candidates (``unvisited_BxN`` all False), whose
      :func:`imitation_loss` is NaN.
    ValueError: N < 3, or ``min_length`` not an int in ``[3, N + 1]``.
  """
  tsp.check_num_cities(np.shape(tours_BxN)[-1], "tours.shape[1]")
  tsp.check_tours(tours_BxN, np.shape(tours_BxN)[-1], "tours")
  batch, n = np.shape(tours_BxN)
  check_int("min_length", min_length, 3)
  if not 3 <= min_length <= n + 1:
    raise ValueError(f"min_length must be in [3, {n + 1}]; got {min_length}.")
  start_key, direction_key, length_key = jax.random.split(key, 3)
  start_B = jax.random.randint(start_key, (batch,), 0, n)
  direction_B = 2 * jax.random.bernoulli(direction_key, shape=(batch,)).astype(
      jnp.int32) - 1
  length_B = jax.random.randint(length_key, (batch,), min_length, n + 2)
  steps_K = jnp.arange(n + 1)
  positions_BxK = (start_B[:, None] + direction_B[:, None] * steps_K[None]) % n
  path_BxK = jnp.take_along_axis(_gather_cities(tours_BxN), positions_BxK,
                                 axis=1)
  between_BxK = (steps_K[None] >= 1) & (steps_K[None] <= length_B[:, None] - 2)
  unvisited_BxN = jnp.any(
      (path_BxK[:, :, None] == jnp.arange(n)[None, None, :])
      & between_BxK[:, :, None], axis=1)
  # A traced row that is not a permutation would give a plausible example
  # with a wrong label: it gets no candidates, so its loss is NaN.
  is_tour_B = jnp.all(jnp.sort(_gather_cities(tours_BxN), axis=1)
                      == jnp.arange(n)[None, :], axis=1)
  unvisited_BxN = unvisited_BxN & is_tour_B[:, None]
  destination_B = jnp.take_along_axis(path_BxK, length_B[:, None] - 1,
                                      axis=1)[:, 0]
  return PartialPaths(destination_B.astype(jnp.int32),
                      path_BxK[:, 0].astype(jnp.int32), unvisited_BxN,
                      path_BxK[:, 1].astype(jnp.int32))


def imitation_loss(model: HeavyDecoder, coords_BxNx2: jax.Array,
                   paths: PartialPaths) -> jax.Array:
  """Mean cross-entropy of ``paths.target`` under the model's next-city softmax.

  Raises:
    TypeError: ``model`` is not a :class:`HeavyDecoder` or ``paths`` not
      :class:`PartialPaths`.
    ValueError: ``coords_BxNx2`` is not a real ``[B, N, 2]`` array with
      B >= 1 (concrete: finite), or ``paths`` does not hold one example per
      instance: int ``[B]`` cities and a bool ``[B, N]`` unvisited mask;
      concrete, a city id outside ``[0, N)``, an example without candidates
      or a target that is not one of its candidates.

  Traced values are not checked: a target outside the unvisited cities has
  probability 0 (an infinite loss), a city id outside ``[0, N)`` or an
  example without candidates gives a NaN loss, and so do non-finite
  coordinates.
  """
  _check_model(model)
  if not isinstance(paths, PartialPaths):
    raise TypeError(f"paths must be PartialPaths; got {type(paths).__name__}.")
  tsp.check_coords(coords_BxNx2)
  batch, n = np.shape(coords_BxNx2)[:2]
  if batch < 1:
    raise ValueError("coords_BxNx2 must hold at least one example (the loss"
                     " is a mean); got none.")
  expected = PartialPaths((batch,), (batch,), (batch, n), (batch,))
  for name, array, shape in zip(PartialPaths._fields, paths, expected):
    if np.shape(array) != shape:
      raise ValueError(f"paths.{name} must have shape {list(shape)} for"
                       f" coords of shape {np.shape(coords_BxNx2)}; got"
                       f" {list(np.shape(array))}.")
  _check_step(batch, n, *paths[:3])
  _check_ids(paths.target_B, "paths.target_B", (batch,), n)
  if not isinstance(paths.unvisited_BxN, jax.core.Tracer) and not isinstance(
      paths.target_B, jax.core.Tracer):
    unvisited = np.asarray(paths.unvisited_BxN)
    bad = ~unvisited[np.arange(batch), np.asarray(paths.target_B)]
    if bad.any():
      first = int(np.flatnonzero(bad)[0])
      empty = ("" if unvisited.any(axis=1).all()
               else " (some have no candidates at all)")
      raise ValueError(
          f"paths.target_B[{first}] must be one of the example's candidates"
          f" (paths.unvisited_BxN[{first}]); {int(bad.sum())} such"
          f" examples{empty}.")
  logits_BxN = model(coords_BxNx2, paths.destination_B, paths.current_B,
                     paths.unvisited_BxN)
  log_probs_BxN = jax.nn.log_softmax(logits_BxN, axis=-1)
  picked_B = jnp.take_along_axis(log_probs_BxN, paths.target_B[:, None],
                                 axis=1)[:, 0]
  # -1 would be read as the last city: ids outside [0, N) give NaN instead.
  in_range_B = (paths.target_B >= 0) & (paths.target_B < n)
  return -jnp.mean(jnp.where(in_range_B, picked_B, jnp.nan))
