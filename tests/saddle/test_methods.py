"""GDA, EG, OGDA and the Decoupled Method: convergence, counters, sharding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import saddle

BASELINES = {name: lambda game, name=name: saddle.textbook_baseline(name, game)
             for name in saddle.BASELINE_NAMES}


@pytest.fixture(scope="module", autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


@pytest.fixture(scope="module")
def saddle_game():
  return saddle.random_saddle_game(jax.random.key(0), 4, l_xx=4.0, l_xy=1.0,
                                   mu=0.5, dtype=jnp.float64)


@pytest.fixture(scope="module")
def games():
  key = jax.random.key(1)
  return {
      n: saddle.random_monotone_game(jax.random.fold_in(key, n), n, 3, mu=0.2,
                                     l_self=8.0, l_cross=1.0,
                                     dtype=jnp.float64)
      for n in (4, 8)
  }


# One trace length for every run, so that runs of a method on games of one
# shape share a compiled program; step_limit (traced) sets the budget.
TRACE_LENGTH = 5000


def _solve(method, game, step_limit, mesh=None, rtol=1e-8):
  state = saddle.init(method, game, game.zeros(), mesh=mesh)
  stop = rtol * float(saddle.residual_norm(game, game.zeros()))
  return saddle.run(method, game, state, num_steps=TRACE_LENGTH,
                    stop_residual=stop, step_limit=step_limit, mesh=mesh)


def _final_iterate(method, state):
  if isinstance(method, saddle.DecoupledMethod):
    return state.iterate
  return jnp.stack([state.view[i, i] for i in range(state.view.shape[0])])


@pytest.mark.parametrize("name", ["gda", "extragradient", "optimistic_gda",
                                  "dm_sp"])
def test_every_method_converges_on_a_saddle_problem(saddle_game, name):
  method = saddle.dm_sp() if name == "dm_sp" else BASELINES[name](saddle_game)
  num_steps = 5000
  state, trace = _solve(method, saddle_game, num_steps)
  taken = int(trace.num_steps_taken)
  assert taken < num_steps, f"{name} did not reach the tolerance"
  z = _final_iterate(method, state)
  np.testing.assert_allclose(z, saddle_game.solution, atol=1e-6)


@pytest.mark.parametrize("name", ["extragradient", "optimistic_gda", "dm_sp"])
def test_methods_converge_on_a_bilinear_game(name):
  game = saddle.random_bilinear_game(jax.random.key(4), 4, l_xy=1.0,
                                     min_singular_value=0.5,
                                     dtype=jnp.float64)
  # gamma = 1/L leaves EG's top singular mode undamped on a bilinear game.
  method = {"extragradient": saddle.extragradient(0.5),
            "optimistic_gda": saddle.optimistic_gda(0.5),
            "dm_sp": saddle.dm_sp()}[name]
  state, trace = _solve(method, game, 5000)
  assert int(trace.num_steps_taken) < 5000
  np.testing.assert_allclose(_final_iterate(method, state), game.solution,
                             atol=1e-6)


def test_gda_diverges_on_a_bilinear_game():
  game = saddle.random_bilinear_game(jax.random.key(4), 4, dtype=jnp.float64)
  _, trace = _solve(saddle.gda(0.1), game, 200)
  residual = np.asarray(trace.residual)[:200]
  assert residual[-1] > 2 * residual[0]


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_dm_vip_converges_on_an_n_player_game(games):
  game = games[4]
  state, trace = _solve(saddle.dm_vip(), game, 500)
  assert int(trace.num_steps_taken) < 500
  np.testing.assert_allclose(state.iterate, game.solution, atol=1e-6)
  # Strongly monotone: each stage contracts, so the distance falls linearly.
  residual = np.asarray(trace.residual)[:int(trace.num_steps_taken)]
  assert np.all(np.diff(np.log(residual[:20])) < 0)


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_decoupled_method_solves_the_robust_regression():
  features = jax.random.normal(jax.random.key(5), (48, 3), jnp.float64)
  targets = features @ jnp.array([1.0, -2.0, 0.5]) + 0.1
  game = saddle.robust_regression(features, targets, num_nodes=3, beta=8.0)
  assert float(saddle.residual_norm(game, game.solution)) < 1e-10
  state, trace = _solve(saddle.dm_sp(), game, 500)
  assert int(trace.num_steps_taken) < 500
  np.testing.assert_allclose(state.iterate, game.solution, atol=1e-6)
  # Reading B: the node operators average to the full operator.
  z = game.solution + 0.3
  node_operators = jax.jit(lambda data, z: jnp.stack(
      [saddle.node_operator(data, m, z) for m in range(3)]))
  np.testing.assert_allclose(
      np.mean(node_operators(game.player_data, z), axis=0),
      jax.jit(game.operator)(z), rtol=1e-10)
  with pytest.raises(ValueError, match="beta=1.0 is too small"):
    saddle.robust_regression(features, targets, num_nodes=3, beta=1.0)


@pytest.mark.parametrize("multiplier", [1.0, 0.5])
def test_textbook_baselines_take_their_textbook_steps(saddle_game, multiplier):
  lipschitz = float(saddle.lipschitz_bound(saddle_game))
  mu = float(saddle_game.monotonicity)
  steps = {name: saddle.textbook_baseline(name, saddle_game,
                                          multiplier).step_size
           for name in saddle.BASELINE_NAMES}
  assert steps == {"extragradient": multiplier / lipschitz,
                   "optimistic_gda": multiplier * 0.5 / lipschitz,
                   "gda": multiplier * mu / lipschitz**2}
  assert isinstance(saddle.textbook_baseline("gda", saddle_game), saddle.GDA)
  with pytest.raises(ValueError, match="unknown baseline 'adam'"):
    saddle.textbook_baseline("adam", saddle_game)


@pytest.mark.parametrize("name,rounds,oracle_calls", [
    ("gda", [1, 2, 3], [1, 2, 3]),
    ("extragradient", [2, 4, 6], [2, 4, 6]),
    ("optimistic_gda", [1, 2, 3], [1, 2, 3]),
])
def test_baseline_counters_match_a_hand_count(saddle_game, name, rounds,
                                              oracle_calls):
  method = BASELINES[name](saddle_game)
  _, trace = _solve(method, saddle_game, 3)
  assert int(trace.num_steps_taken) == 3
  assert trace.rounds[:4].tolist() == rounds + [-1]
  assert trace.oracle_calls[:3].tolist() == [[c, c] for c in oracle_calls]
  assert trace.scalar_allreduces[:3].tolist() == [0, 0, 0]


def _hand_decoupled(z0, eta, sigma, tau, stages):
  """DM-SP on f(x, y) = x * y by hand: with L_ii = 0 a local solve is exact
  after one gradient step (step eta = 1 / L_phi, no momentum), and the next
  gradient confirms it; a warm start that passes the test costs one call."""
  x, y = z0
  view = [x, y]
  rounds = oracle = 0
  for _ in range(stages):
    centre = [x, y]
    own = list(centre)
    while True:
      linear = [view[1], -view[0]]  # d f_1/dx = y, d f_2/dy = -x
      for i in range(2):
        grad = linear[i] + (own[i] - centre[i]) / eta
        oracle += 1 if i == 0 else 0
        if abs(grad) > tau * max(abs(own[i] - centre[i]) / eta, 1e-12):
          own[i] = centre[i] - eta * linear[i]
          oracle += 1 if i == 0 else 0
      view = list(own)
      rounds += 1
      operator = [view[1], -view[0]]
      oracle += 1
      error = [own[i] - centre[i] + eta * operator[i] for i in range(2)]
      if (sum(e * e for e in error)
          <= sigma**2 * sum((own[i] - centre[i]) ** 2 for i in range(2))):
        break
    x, y = (centre[i] - eta * operator[i] for i in range(2))
  return (x, y), rounds, oracle


@pytest.mark.parametrize("count_scalar_allreduce", [False, True])
def test_decoupled_counters_match_a_hand_count(count_scalar_allreduce):
  game = saddle.saddle_game(np.zeros((1, 1)), np.ones((1, 1)),
                            np.zeros((1, 1)), np.zeros(1), np.zeros(1))
  eta, sigma, tau = 0.25, 0.5, 0.1
  method = saddle.dm_sp(eta=eta, sigma=sigma, tau=tau,
                        count_scalar_allreduce=count_scalar_allreduce)
  z0 = jnp.array([[1.0], [1.0]])
  state, trace = saddle.run(method, game, saddle.init(method, game, z0),
                            num_steps=3)
  expected_z, rounds, oracle = _hand_decoupled((1.0, 1.0), eta, sigma, tau, 3)
  # Every stage passes the HPE test after its first Jacobi round: per stage
  # one exchange, one all-reduce, and 2 + 1 oracle calls per player.
  assert (rounds, oracle) == (3, 9)
  extra = 3 if count_scalar_allreduce else 0
  assert trace.rounds.tolist() == [1 + extra // 3, 2 + 2 * extra // 3,
                                   3 + extra]
  assert trace.scalar_allreduces.tolist() == [1, 2, 3]
  assert trace.oracle_calls[-1].tolist() == [oracle, oracle]
  np.testing.assert_allclose(state.iterate[:, 0], expected_z, rtol=1e-12)
  assert state.num_stages.tolist() == [3, 3]


_mesh = saddle.player_mesh


def test_player_mesh_has_one_device_per_player():
  mesh = saddle.player_mesh(4)
  assert dict(mesh.shape) == {saddle.PLAYER_AXIS: 4}
  assert list(mesh.devices) == jax.devices()[:4]
  too_many = jax.device_count() + 1
  with pytest.raises(ValueError,
                     match=f"{too_many} players need {too_many} devices"):
    saddle.player_mesh(too_many)


def test_replicated_puts_the_whole_value_on_every_device():
  mesh = saddle.player_mesh(2)
  value = np.arange(3.0)
  on_mesh = saddle.replicated(value, mesh)
  assert on_mesh.sharding.is_fully_replicated
  assert len(on_mesh.sharding.device_set) == 2
  np.testing.assert_array_equal(on_mesh, value)
  plain = saddle.replicated(np.float64(2.5), None)
  assert plain.shape == () and float(plain) == 2.5


@pytest.mark.parametrize("num_players,name", [
    (4, "gda"), (4, "extragradient"), (4, "optimistic_gda"), (4, "dm_vip"),
    (8, "extragradient"), (8, "dm_vip"),
])
def test_sharded_run_equals_single_device_run(games, num_players, name):
  game = games[num_players]
  method = saddle.dm_vip() if name == "dm_vip" else BASELINES[name](game)
  mesh = _mesh(num_players)
  single = _solve(method, game, 60, rtol=1e-6)
  sharded = _solve(method, game, 60, mesh=mesh, rtol=1e-6)
  state_leaf = jax.tree.leaves(sharded[0])[0]
  assert len(state_leaf.sharding.device_set) == num_players
  single, sharded = saddle.gather_to_host((single, sharded))
  for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(sharded)):
    np.testing.assert_allclose(np.asarray(b, np.float64),
                               np.asarray(a, np.float64), rtol=1e-6,
                               atol=1e-12)
  trace = sharded[1]
  assert int(trace.num_steps_taken) > 2
  assert trace.oracle_calls.shape == (TRACE_LENGTH, num_players)


def test_player_count_must_match_the_mesh(saddle_game):
  method = saddle.extragradient(0.01)
  with pytest.raises(ValueError, match="2 players but the mesh axis"):
    saddle.init(method, saddle_game, saddle_game.zeros(), mesh=_mesh(4))
  state = saddle.init(method, saddle_game, saddle_game.zeros())
  with pytest.raises(ValueError, match="2 players but the mesh axis"):
    saddle.run(method, saddle_game, state, num_steps=1, mesh=_mesh(4))
  wrong_axis = jax.make_mesh((2,), ("data",), devices=jax.devices()[:2],
                             axis_types=(jax.sharding.AxisType.Explicit,))
  with pytest.raises(ValueError, match="axis named 'players'"):
    saddle.init(method, saddle_game, saddle_game.zeros(), mesh=wrong_axis)


def test_dm_sp_needs_two_players(games):
  game = games[4]
  with pytest.raises(ValueError, match="dm_sp is the two-player method"):
    saddle.init(saddle.dm_sp(), game, game.zeros())


@pytest.mark.parametrize("kwargs,match", [
    ({"coupling": 0.0}, "coupling must be > 0"),
    ({"coupling": -1.0}, "coupling must be > 0"),
    ({"self_smoothness": [-1.0, 2.0]}, "self_smoothness must be >= 0"),
    ({"self_smoothness": [1.0, 2.0, 3.0]}, r"self_smoothness must have shape"),
    ({"monotonicity": -0.1}, "monotonicity must be >= 0"),
])
def test_bad_constant_estimates_are_named_errors(saddle_game, kwargs, match):
  with pytest.raises(ValueError, match=match):
    saddle.with_constants(saddle_game, **kwargs)


@pytest.mark.parametrize("build,match", [
    (lambda: saddle.gda(0.0), "step_size must be > 0"),
    (lambda: saddle.extragradient(-1.0), "step_size must be > 0"),
    (lambda: saddle.optimistic_gda(0.0), "step_size must be > 0"),
    (lambda: saddle.dm_sp(eta=0.0), "eta must be > 0"),
    (lambda: saddle.dm_vip(max_jacobi_rounds=0), "max_jacobi_rounds"),
])
def test_bad_method_settings_are_named_errors(build, match):
  with pytest.raises(ValueError, match=match):
    build()


def test_start_of_the_wrong_shape_is_a_named_error(saddle_game):
  with pytest.raises(ValueError, match=r"z0 must have shape .* \(2, 4\)"):
    saddle.init(saddle.dm_sp(), saddle_game, jnp.zeros((2, 3)))


def test_nan_in_the_game_stops_the_run_and_shows(saddle_game):
  data = saddle_game.player_data
  poisoned = data._replace(offset=data.offset.at[0, 0].set(jnp.nan))
  game = saddle.make_game(poisoned, saddle_game.player_gradient,
                          block_size=4, self_smoothness=[4.0, 4.0],
                          coupling=1.0)
  method = saddle.extragradient(0.01)
  _, trace = saddle.run(method, game, saddle.init(method, game, game.zeros()),
                        num_steps=TRACE_LENGTH, step_limit=10)
  assert int(trace.num_steps_taken) == 0


def test_divergence_stops_the_run_and_shows(saddle_game):
  method = saddle.extragradient(100.0)
  _, trace = saddle.run(method, saddle_game,
                        saddle.init(method, saddle_game, saddle_game.zeros()),
                        num_steps=TRACE_LENGTH, max_residual=1e6)
  taken = int(trace.num_steps_taken)
  assert 0 < taken < 50
  assert not float(trace.residual[taken - 1]) <= 1e6


def test_methods_with_equal_fields_have_distinct_treedefs(saddle_game):
  # A jit cache keyed on treedefs must never run one method's program for
  # another (jax's register_dataclass treedefs compare equal across classes).
  methods = [saddle.gda(0.01), saddle.extragradient(0.01),
             saddle.optimistic_gda(0.01)]
  structures = [jax.tree.structure(m) for m in methods]
  assert len({str(s) for s in structures}) == 3
  assert all(a != b for i, a in enumerate(structures)
             for b in structures[i + 1:])


def _primitives(jaxpr):
  """Primitive names of a jaxpr, with each nested jaxpr as a sub-list."""
  names = []
  for eqn in jaxpr.eqns:
    names.append(eqn.primitive.name)
    for value in eqn.params.values():
      for sub in value if isinstance(value, (tuple, list)) else (value,):
        inner = getattr(sub, "jaxpr", sub)
        if hasattr(inner, "eqns"):
          names.append(_primitives(inner))
  return names


def _flat(names):
  return [n for x in names for n in (_flat(x) if isinstance(x, list) else [x])]


def _step_jaxpr(method, game):
  """The jaxpr of one step of the per-player program under shard_map."""
  mesh = _mesh(game.num_players)
  state = saddle.init(method, game, game.zeros(), mesh=mesh)

  def per_player(data, self_smoothness, state):
    own = lambda tree: jax.tree.map(lambda x: x[0], tree)
    player = saddle.Player(jax.lax.axis_index(saddle.PLAYER_AXIS), own(data),
                           own(self_smoothness), game.coupling,
                           game.monotonicity, game.player_gradient)
    return jax.tree.map(lambda x: x[None], method.step(player, own(state)))

  stepped = jax.shard_map(per_player, mesh=mesh, in_specs=jax.P("players"),
                          out_specs=jax.P("players"), check_vma=False)
  split = jax.NamedSharding(mesh, jax.P("players"))
  data, self_smoothness = jax.device_put(
      (game.player_data, game.self_smoothness), split)
  jaxpr = jax.make_jaxpr(stepped)(data, self_smoothness, state).jaxpr
  (inner,) = [x for x in _primitives(jaxpr) if isinstance(x, list)]
  return inner


@pytest.mark.parametrize("name,exchanges", [
    ("gda", 1), ("extragradient", 2), ("optimistic_gda", 1)])
def test_each_counted_round_is_one_all_gather(saddle_game, name, exchanges):
  method = BASELINES[name](saddle_game)
  names = _flat(_step_jaxpr(method, saddle_game))
  assert names.count("all_gather") == exchanges
  assert "psum" not in names


def test_decoupled_local_solves_run_without_collectives(saddle_game):
  names = _step_jaxpr(saddle.dm_sp(), saddle_game)
  # A stage is a while loop over Jacobi rounds; a round's body holds the
  # local AGD (a nested while loop), then the exchange and the HPE test.
  (body,) = [x for x in names if isinstance(x, list)
             and "all_gather" in _flat(x)]
  top_level = [n for n in body if not isinstance(n, list)]
  # The exchange of blocks, and the HPE test's scalar all-reduce (an
  # all-gather that is summed: network.player_sum).
  assert top_level.count("all_gather") == 2
  assert top_level.count("psum") == 0
  local_solves = [x for x in body if isinstance(x, list)]
  assert local_solves
  for local in local_solves:
    assert not {"all_gather", "psum", "ppermute", "all_to_all"} & set(
        _flat(local))
