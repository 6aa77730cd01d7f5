"""Orbax checkpoints behind three calls: ``save``, ``restore`` and ``restore_verified``.

This is the only module that talks to orbax, so moving to orbax's V1 API
touches one file. Saves are synchronous: the states of our experiments are
small, and a synchronous save means that once ``save`` returns, a SIGKILL
cannot lose the step (an interrupted save leaves only an uncommitted
temporary directory, which orbax ignores and cleans up).

Orbax stores no checksum, so a step whose array bytes were damaged restores
silently with wrong values. Every step saved here therefore carries a digest
file (SHA-256 of every file orbax wrote for it, and the hash of the config
that made it); :meth:`Checkpointer.restore_verified` checks it and falls
back to older steps, deleting the damaged ones, and says so.
"""

import hashlib
import json
import os
from typing import Any, Callable

from absl import logging
import jax
import orbax.checkpoint as ocp

DIGEST_FILE = "jaxpapers_digest.json"


class Checkpointer:
  """Keeps the latest ``max_to_keep`` checkpoints of one training run.

  Every process must call ``save`` and ``restore`` (orbax coordinates the
  writes); pytrees may hold sharded ``jax.Array`` leaves.
  """

  def __init__(self, directory: str, *, max_to_keep: int = 2,
               config_hash: str = ""):
    self.directory = directory
    self.config_hash = config_hash
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

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def save(self, step: int, state: Any, *, finished: bool = False) -> None:
    """Saves ``state`` as ``step`` (``step`` must be new) and its digest.

    ``finished`` marks the last step of a run (it stopped early or reached
    its end), so that a rerun does not train past it.
    """
    self._manager.save(step, args=ocp.args.StandardSave(state), force=True)
    self._manager.wait_until_finished()
    if jax.process_index() == 0:
      record = {"digest": _digest(self._step_dir(step)),
                "config_hash": self.config_hash, "finished": bool(finished)}
      path = os.path.join(self._step_dir(step), DIGEST_FILE)
      with open(path + ".tmp", "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
      os.replace(path + ".tmp", path)

  def restore(self, abstract_state: Any, step: int | None = None) -> Any:
    """Restores into ``abstract_state`` (``jax.ShapeDtypeStruct`` leaves with shardings).

    Restoring into an abstract target (never a bare restore) keeps working
    when the device count differs from the saving job's. No digest check:
    see :meth:`restore_verified`.
    """
    step = self.latest_step() if step is None else step
    if step is None:
      raise FileNotFoundError(
          f"no checkpoint to restore in {self._manager.directory}."
      )
    return self._manager.restore(
        step, args=ocp.args.StandardRestore(abstract_state)
    )

  def restore_verified(
      self, abstract_state: Any, *,
      acceptable: Callable[[int], bool] = lambda step: True,
  ) -> tuple[Any, int, bool] | None:
    """The newest step whose digest matches: ``(state, step, finished)``, or None.

    Steps that fail (no digest, a digest or config-hash mismatch, an orbax
    error, or ``acceptable(step)`` false, e.g. no metrics record at that
    step) are reported with a warning and deleted, so that the run redoes
    them; None means no step survived and the run starts over.
    """
    for step in reversed(self.all_steps()):
      problem = self._problem(step) or (
          None if acceptable(step) else "no metrics record at this step")
      if problem is None:
        try:
          state = self.restore(abstract_state, step)
        except Exception as e:  # pylint: disable=broad-except
          problem = f"orbax could not restore it ({type(e).__name__}: {e})"
      if problem is None:
        with open(os.path.join(self._step_dir(step), DIGEST_FILE)) as f:
          finished = json.load(f)["finished"]
        return state, step, finished
      older = [s for s in self.all_steps() if s < step]
      logging.warning(
          "checkpoint %s step %d is unusable: %s; %s.", self.directory, step,
          problem, f"falling back to step {older[-1]}" if older
          else "no older step: starting the run over")
      self._manager.delete(step)
    return None

  def _problem(self, step: int) -> str | None:
    path = os.path.join(self._step_dir(step), DIGEST_FILE)
    try:
      with open(path) as f:
        record = json.load(f)
    except (OSError, ValueError):
      return "it has no readable digest (a save interrupted before it)"
    if record.get("config_hash") != self.config_hash:
      return (f"it was made by config {record.get('config_hash')}, not"
              f" {self.config_hash}")
    if record.get("digest") != _digest(self._step_dir(step)):
      return "its files do not match their digest (damaged)"
    return None

  def _step_dir(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def _digest(step_dir: str) -> str:
  """SHA-256 over the relative paths and bytes of every file of a step."""
  h = hashlib.sha256()
  for root, dirs, files in os.walk(step_dir):
    dirs.sort()
    for name in sorted(files):
      if name.startswith(DIGEST_FILE):
        continue
      path = os.path.join(root, name)
      h.update(os.path.relpath(path, step_dir).encode() + b"\0")
      with open(path, "rb") as f:
        h.update(hashlib.sha256(f.read()).digest())
  return h.hexdigest()


def abstract_like(state: Any) -> Any:
  """Abstract restore target (shape, dtype, sharding) of a concrete state."""
  return jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
