"""Orbax checkpoints behind two calls: ``save(step, state)`` and ``restore(abstract)``.

This is the only module that talks to orbax, so moving to orbax's V1 API
touches one file. Saves are synchronous: the states of our experiments are
small, and a synchronous save means that once ``save`` returns, a SIGKILL
cannot lose the step (an interrupted save leaves only an uncommitted
temporary directory, which orbax ignores and cleans up).
"""

from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpointer:
  """Keeps the latest ``max_to_keep`` checkpoints of one training run.

  Every process must call ``save`` and ``restore`` (orbax coordinates the
  writes); pytrees may hold sharded ``jax.Array`` leaves.
  """

  def __init__(self, directory: str, *, max_to_keep: int = 2):
    self._manager = ocp.CheckpointManager(
        directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            create=True,
            cleanup_tmp_directories=True,
            enable_async_checkpointing=False,
        ),
    )

  def latest_step(self) -> int | None:
    """The newest committed step, or None when nothing was saved yet."""
    return self._manager.latest_step()

  def save(self, step: int, state: Any) -> None:
    """Saves ``state`` as ``step`` (overwrites nothing; ``step`` must be new)."""
    self._manager.save(step, args=ocp.args.StandardSave(state), force=True)
    self._manager.wait_until_finished()

  def restore(self, abstract_state: Any, step: int | None = None) -> Any:
    """Restores into ``abstract_state`` (``jax.ShapeDtypeStruct`` leaves with shardings).

    Restoring into an abstract target (never a bare restore) keeps working
    when the device count differs from the saving job's.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(
          f"no checkpoint to restore in {self._manager.directory}."
      )
    return self._manager.restore(
        step, args=ocp.args.StandardRestore(abstract_state)
    )

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def abstract_like(state: Any) -> Any:
  """Abstract restore target (shape, dtype, sharding) of a concrete state."""
  return jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
