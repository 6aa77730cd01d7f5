r"""A generative-memory baseline in the spirit of GCAL (the competitor EMC claims to beat).

GCAL (ICML 2025, https://arxiv.org/abs/2505.16860; public code
https://github.com/joe817/GCAL, commit 3caedce) adapts the whole
source GNN to each target domain with information maximisation (IM) while
replaying memory graphs of earlier domains, and learns a variational memory
generator. Per domain and epoch (this module follows its ``GCAL.py``):

1. **Adapt**: one Adam+L2 step (1e-2, 1e-4) on all model parameters of
   ``IM(G_t) + 0.1 sum_k IM(decode(memory_k))``, BatchNorm in eval mode; a
   teacher EMA (0.9) of the parameters replaces the model after the domain.
2. **Generate**: one Adam+L2 step (1e-2, 1e-4; fresh each domain) on the
   generator, a VGAE: a 1-layer GCN with BatchNorm maps ``X`` to ``(mu,
   log var)``, TopK pooling keeps ``m = ceil(0.05 n)`` nodes, the
   reparameterised features ``x~`` go through an edge MLP over all ``m^2``
   pairs (``2F -> 128 -> 128 -> 1`` with BatchNorm) whose symmetrised sigmoid
   ``p_ij`` is sharpened by a Gumbel softmax over rows; pairs above 0.8 become
   edges of weight ``p_ij``. Its loss matches the model's IM gradients on the
   real and the memory graph (sum over output units of ``1 - cos``, 2-D
   weights only, differentiated through the inner gradient), plus 0.1 x (the
   Gaussian KL and a Bernoulli(0.1) KL of the edges) plus 0.1 x the squared
   distance of mean embeddings.
3. After the last epoch the domain's ``(mu, log var)`` is stored; replay
   decodes it with ``x~ = mu`` and hard Gumbel edges. Memories sit in a
   fixed-size buffer (one compilation); replay skips unused rows at run time.

Differences from GCAL's code: no dropout during adaptation (deterministic);
the memory size ``m`` is fixed from the source graph at :func:`init` (static
shapes; GCAL uses 5% of each target graph, the same here since our domains
have equal sizes); GCAL's released defaults never generate memory (test
epochs 1 < warmup 5), so we run it with warmup 0 (``docs/emc.md``).
"""

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers import tree
from jaxpapers.graph._baselines import im_step
from jaxpapers.graph._gcn import BN_EPSILON
from jaxpapers.graph._gcn import classify
from jaxpapers.graph._gcn import embed
from jaxpapers.graph._gcn import GCN
from jaxpapers.graph._gcn import log_probs
from jaxpapers.graph._graphs import ceil_fraction
from jaxpapers.graph._graphs import check_graph
from jaxpapers.graph._graphs import gcn_propagate
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import make_graph
from jaxpapers.graph._graphs import masked_mean
from jaxpapers.graph._graphs import masked_moments
from jaxpapers.graph._graphs import node_features
from jaxpapers.graph._graphs import node_mask
from jaxpapers.graph._graphs import validated
from jaxpapers.graph._tta import adam_l2
from jaxpapers.graph._tta import Adapter
from jaxpapers.graph._tta import information_maximization

EDGE_HIDDEN = 128
EDGE_THRESHOLD = 0.8
GUMBEL_TEMPERATURE = 0.5
EDGE_PRIOR = 0.1


@dataclasses.dataclass(frozen=True)
class GenerativeMemoryOptions:
  memory_size: int
  capacity: int  # stored memory graphs; the oldest is overwritten when full
  epochs: int = 1
  warmup_epochs: int = 0
  learning_rate: float = 1e-2
  weight_decay: float = 1e-4
  generator_learning_rate: float = 1e-2
  generator_weight_decay: float = 1e-4
  teacher_momentum: float = 0.9
  marginal_weight: float = 0.1
  replay_weight: float = 0.1
  vae_weight: float = 0.1
  mmd_weight: float = 0.1

  def __post_init__(self):
    for name, low in (("memory_size", 1), ("capacity", 1), ("epochs", 0),
                      ("warmup_epochs", 0)):
      check_int(name, getattr(self, name), low)
    check_real("teacher_momentum", self.teacher_momentum, low=0.0, high=1.0)
    for name in ("learning_rate", "weight_decay", "generator_learning_rate",
                 "generator_weight_decay", "marginal_weight", "replay_weight",
                 "vae_weight", "mmd_weight"):
      check_real(name, getattr(self, name), low=0.0)


jax.tree_util.register_static(GenerativeMemoryOptions)


class GeneratorParams(NamedTuple):
  encoder: dict[str, jax.Array]  # GCN layer F -> 2F
  encoder_norm: dict[str, jax.Array]
  selector: jax.Array  # TopK projection (2F,)
  edge_layers: tuple[dict[str, jax.Array], ...]  # 2F -> 128 -> 128 -> 1
  edge_norms: tuple[dict[str, jax.Array], ...]


class MemoryGraph(NamedTuple):
  mean: jax.Array  # (m, F)
  log_var: jax.Array  # (m, F)


class GenerativeMemoryState(NamedTuple):
  model: GCN
  opt_state: Any
  generator: GeneratorParams
  memories: MemoryGraph  # (capacity, m, F) leaves, one row per adapted domain
  num_memories: jax.Array  # rows in use
  key: jax.Array
  options: GenerativeMemoryOptions  # static


def init_generator(key: jax.Array, feature_width: int) -> GeneratorParams:
  """Glorot weights, zero biases, unit BatchNorm scales.

  ``feature_width`` must be an int >= 1 (``ValueError``).
  """
  check_int("feature_width", feature_width, 1)
  keys = jax.random.split(key, 5)
  glorot = jax.nn.initializers.glorot_uniform()

  def dense(k, a, b):
    return {"w": glorot(k, (a, b), jnp.float32), "b": jnp.zeros((b,), jnp.float32)}

  def norm(d):
    return {"scale": jnp.ones((d,), jnp.float32), "bias": jnp.zeros((d,), jnp.float32)}

  wide = 2 * feature_width
  return GeneratorParams(
      encoder=dense(keys[0], feature_width, wide),
      encoder_norm=norm(wide),
      selector=jax.random.uniform(keys[1], (wide,), jnp.float32, -1.0, 1.0)
      / np.sqrt(wide),
      edge_layers=(dense(keys[2], wide, EDGE_HIDDEN),
                   dense(keys[3], EDGE_HIDDEN, EDGE_HIDDEN),
                   dense(keys[4], EDGE_HIDDEN, 1)),
      edge_norms=(norm(EDGE_HIDDEN), norm(EDGE_HIDDEN)),
  )


def _norm(x, norm, mask=None):
  mean, var = masked_moments(x, jnp.ones(x.shape[:1], bool) if mask is None else mask)
  return ((x - mean[None, :]) * jax.lax.rsqrt(var + BN_EPSILON)[None, :]
          * norm["scale"][None, :] + norm["bias"][None, :])


def encode(generator: GeneratorParams, graph: GraphsTuple, memory_size: int
           ) -> MemoryGraph:
  """``(mu, log var)`` of the ``memory_size`` top-scoring real nodes (TopK pooling).

  Raises:
    ValueError: a graph whose feature width is not the generator's, or a
      ``memory_size`` that is not an int in ``[1, N]``, N the real nodes
      when the mask is concrete (traced, all nodes: padding nodes score
      ``-inf`` and come last).
  """
  graph = validated(graph, "graph",
                    feature_width=generator.encoder["w"].shape[0])
  check_int("memory_size", memory_size, 1)
  mask = node_mask(graph)
  # Counted on concrete masks only; traced, a memory larger than the real
  # nodes would take padding nodes (scored -inf) last.
  available = (mask.shape[0] if isinstance(mask, jax.core.Tracer)
               else int(np.sum(np.asarray(mask))))
  if memory_size > available:
    raise ValueError(
        f"memory_size={memory_size} exceeds the graph's {available} real"
        " nodes.")
  z = (gcn_propagate(graph, node_features(graph) @ generator.encoder["w"])
       + generator.encoder["b"][None, :])
  z = _norm(z, generator.encoder_norm, mask)
  # A selector sharded along an Explicit axis needs the output sharding:
  # z's rows keep theirs.
  z_spec = tree.explicit_spec(z)
  rows = None if z_spec is None else jax.P(*z_spec[:-1])
  score = (jnp.matmul(z, generator.selector, out_sharding=rows)
           / jnp.linalg.norm(generator.selector))
  _, top = jax.lax.top_k(jnp.where(mask, score, -jnp.inf), memory_size)
  pooled = z[top] * jnp.tanh(score[top])[:, None]
  mean, log_var = jnp.split(pooled, 2, axis=1)
  return MemoryGraph(mean, log_var)


def edge_probabilities(generator: GeneratorParams, x_MxF: jax.Array) -> jax.Array:
  """Symmetric ``sigmoid`` edge probabilities of all node pairs: ``(m, m)``.

  ``ValueError`` unless ``x_MxF`` is ``(m, F)`` with the generator's F.
  """
  width = generator.encoder["w"].shape[0]
  if np.ndim(x_MxF) != 2 or np.shape(x_MxF)[1] != width:
    raise ValueError(
        f"x_MxF must be (m, {width}) (the generator's feature width); got"
        f" {np.shape(x_MxF)}.")
  m = x_MxF.shape[0]
  # The m^2 pairs mix every row with every other: on Explicit axes they are
  # built from gathered nodes and parameters (a memory graph is small).
  generator, x_MxF = tree.gather_explicit((generator, x_MxF))[0]
  pairs = jnp.concatenate([jnp.repeat(x_MxF, m, axis=0), jnp.tile(x_MxF, (m, 1))],
                          axis=1)
  z = pairs
  for layer, norm in zip(generator.edge_layers[:-1], generator.edge_norms):
    z = jax.nn.relu(_norm(z @ layer["w"] + layer["b"][None, :], norm))
  last = generator.edge_layers[-1]
  logits = (z @ last["w"] + last["b"][None, :]).reshape(m, m)
  return jax.nn.sigmoid(0.5 * (logits + logits.T))


def decode(generator: GeneratorParams, x_MxF: jax.Array, key: jax.Array, *,
           hard: bool) -> tuple[GraphsTuple, jax.Array]:
  """A dense memory graph on ``x~`` and its edge probabilities."""
  m = x_MxF.shape[0]
  prob = edge_probabilities(generator, x_MxF)
  gumbel = jax.random.gumbel(key, prob.shape, prob.dtype)
  soft = jax.nn.softmax((prob + gumbel) / GUMBEL_TEMPERATURE, axis=1)
  if hard:
    keep = jax.nn.one_hot(jnp.argmax(soft, 1), m, dtype=bool)
  else:
    keep = soft > EDGE_THRESHOLD
  weights = jnp.where(keep, prob, 0.0)
  senders = np.repeat(np.arange(m), m)
  receivers = np.tile(np.arange(m), m)
  graph = make_graph(x_MxF, senders, receivers)
  return graph._replace(edges=weights.reshape(-1)), prob


def _gradient_distance(real, syn):
  """GCAL's ``match_loss``: sum over 2-D weights of sum_in (1 - cos over outputs)."""
  total = jnp.zeros((), jnp.float32)
  for gr, gs in zip(jax.tree.leaves(real), jax.tree.leaves(syn)):
    if gr.ndim != 2:
      continue
    dot = jnp.sum(gr * gs, -1)
    # safe_norm: rows of dead units are zero, where the plain norm has a NaN
    # gradient (torch's subgradient there is 0).
    norms = optax.safe_norm(gr, 0.0, axis=-1) * optax.safe_norm(gs, 0.0, axis=-1)
    total = total + jnp.sum(1.0 - dot / (norms + 1e-6))
  return total


def _im_of(params, stats, graph, marginal_weight):
  h = embed(GCN(params, stats), graph)
  return information_maximization(classify(params.head, h), node_mask(graph),
                                  marginal_weight)


def _generator_loss(generator, params, stats, graph, real_grads, key, opts):
  memory = encode(generator, graph, opts.memory_size)
  noise = jax.random.normal(jax.random.fold_in(key, 0), memory.mean.shape)
  x = memory.mean + noise * jnp.exp(0.5 * memory.log_var)
  syn, prob = decode(generator, x, jax.random.fold_in(key, 1), hard=False)
  syn_grads = jax.grad(_im_of)(params, stats, syn, opts.marginal_weight)
  match = _gradient_distance(real_grads, syn_grads)
  gaussian_kl = -0.5 * jnp.sum(1.0 + memory.log_var - memory.mean**2
                               - jnp.exp(memory.log_var))
  p = jnp.clip(prob, 1e-6, 1.0 - 1e-6)
  edge_kl = jnp.sum(p * jnp.log(p / EDGE_PRIOR)
                    + (1.0 - p) * jnp.log((1.0 - p) / (1.0 - EDGE_PRIOR)))
  model = GCN(params, stats)
  mmd = jnp.mean((masked_mean(embed(model, graph), node_mask(graph))
                  - jnp.mean(embed(model, syn), 0)) ** 2)
  return match + opts.vae_weight * (gaussian_kl + edge_kl) + opts.mmd_weight * mmd


def _write_row(buffer: jax.Array, row: jax.Array, new: jax.Array) -> jax.Array:
  """``buffer.at[row].set(new)`` for a buffer sharded along Explicit mesh axes.

  A write at a traced row of a sharded row axis has no output sharding: it
  goes to a copy with the row axis gathered, ``new`` sharded like a row, and
  the result is resharded like ``buffer``.
  """
  spec = tree.explicit_spec(buffer)
  if spec is None:
    return buffer.at[row].set(new)
  rows = jax.sharding.reshard(buffer, jax.P(None, *spec[1:]))
  new = jax.sharding.reshard(new, jax.P(*spec[1:]))
  return jax.sharding.reshard(rows.at[row].set(new), spec)


@jax.jit
def update(state: GenerativeMemoryState, graph: GraphsTuple
           ) -> GenerativeMemoryState:
  """Adapts to one domain (model + generator) and stores its memory."""
  opts = state.options
  graph = validated(graph, "graph", feature_width=state.model.feature_width)
  tx = adam_l2(opts.learning_rate, opts.weight_decay)
  tx_generator = adam_l2(opts.generator_learning_rate, opts.generator_weight_decay)
  stats = state.model.stats

  def replay_loss(params, generator, replay_key):
    # A scan over the fixed-size buffer with a cond per row: one compilation
    # for every number of memories, and unused rows cost nothing at run time.
    def replay_one(total, row):
      k, mean = row

      def loss(mean):
        syn, _ = decode(generator, mean, jax.random.fold_in(replay_key, k),
                        hard=True)
        return _im_of(params, stats, syn, opts.marginal_weight)

      used = k < state.num_memories
      return total + jax.lax.cond(used, loss, lambda _: 0.0 * total, mean), None

    # scan refuses a scanned axis sharded along an Explicit mesh axis: the
    # small buffer is gathered.
    rows = (jnp.arange(opts.capacity),
            tree.gather_explicit(state.memories.mean)[0])
    total, _ = jax.lax.scan(replay_one, jnp.zeros((), jnp.float32), rows)
    return opts.replay_weight * total

  def generator_step(model, generator, generator_opt, key):
    real_grads = jax.lax.stop_gradient(
        jax.grad(_im_of)(model.params, stats, graph, opts.marginal_weight))
    grads = jax.grad(_generator_loss)(generator, model.params, stats, graph,
                                      real_grads, key, opts)
    updates, generator_opt = tx_generator.update(grads, generator_opt, generator)
    return optax.apply_updates(generator, updates), generator_opt

  def epoch(i, carry):  # a loop, not unrolled: one compiled epoch body
    model, opt_state, teacher, generator, generator_opt, key = carry
    key, replay_key, generator_key = jax.random.split(key, 3)
    model, opt_state, teacher = im_step(
        model, opt_state, teacher, graph, tx,
        marginal_weight=opts.marginal_weight,
        teacher_momentum=opts.teacher_momentum,
        replay_loss=lambda p: replay_loss(p, generator, replay_key))
    generator, generator_opt = jax.lax.cond(
        i >= opts.warmup_epochs, generator_step,
        lambda model, generator, generator_opt, key: (generator, generator_opt),
        model, generator, generator_opt, generator_key)
    return model, opt_state, teacher, generator, generator_opt, key

  carry = (state.model, state.opt_state, state.model.params, state.generator,
           tx_generator.init(state.generator), state.key)
  model, opt_state, teacher, generator, _, key = jax.lax.fori_loop(
      0, opts.epochs, epoch, carry)
  memory = jax.lax.stop_gradient(encode(generator, graph, opts.memory_size))
  row = state.num_memories % opts.capacity
  memories = jax.tree.map(lambda buffer, new: _write_row(buffer, row, new),
                          state.memories, memory)
  return GenerativeMemoryState(
      model._replace(params=teacher), opt_state, generator, memories,
      jnp.minimum(state.num_memories + 1, opts.capacity), key, opts)


@jax.jit
def predict(state: GenerativeMemoryState, graph: GraphsTuple) -> jax.Array:
  return log_probs(state.model, graph)


@functools.partial(jax.jit, static_argnames="opts")
def _init_state(model, key, opts):
  tx = adam_l2(opts.learning_rate, opts.weight_decay)
  generator_key, key = jax.random.split(key)
  empty = jnp.zeros((opts.capacity, opts.memory_size, model.feature_width),
                    jnp.float32)
  return GenerativeMemoryState(
      model, tx.init(model.params),
      init_generator(generator_key, model.feature_width),
      MemoryGraph(empty, empty), jnp.int32(0), key, opts)


def generative_memory(epochs: int = 1, memory_ratio: float = 0.05,
                      capacity: int = 16, **options) -> Adapter:
  """The GCAL-style baseline as an :class:`~jaxpapers.graph.Adapter`.

  Args:
    epochs: adaptation epochs per domain (GCAL's ``test_epochs``; each epoch
      adapts the model and trains the generator once).
    memory_ratio: memory nodes per source node (GCAL's 5%).
    capacity: memory graphs kept (GCAL keeps all: set it to the number of
      target domains); when full, the oldest is overwritten.
    **options: other fields of :class:`GenerativeMemoryOptions`.

  Returns:
    An :class:`Adapter`.

  Raises:
    ValueError: a field of :class:`GenerativeMemoryOptions` out of range
      (counts below their minimum, negative or non-finite weights and
      rates, ``teacher_momentum`` outside ``[0, 1]``) or ``memory_ratio``
      negative or not finite; checked here, before any source graph.
  """
  check_real("memory_ratio", memory_ratio, low=0.0)
  # memory_size is known only at init; any valid size checks the others now.
  GenerativeMemoryOptions(memory_size=1, capacity=capacity, epochs=epochs,
                          **options)

  def init_fn(model, source_graph, labels, labelled, key):
    del labels, labelled
    check_graph(source_graph, "source_graph", feature_width=model.feature_width)
    num_nodes = int(np.sum(np.asarray(node_mask(source_graph))))
    size = max(model.num_classes, ceil_fraction(memory_ratio, num_nodes))
    opts = GenerativeMemoryOptions(memory_size=size, capacity=capacity,
                                   epochs=epochs, **options)
    return _init_state(model, key, opts)

  return Adapter(init_fn, update, predict)
