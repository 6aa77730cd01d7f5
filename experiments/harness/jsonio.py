"""JSON files that a reader never sees half-written: the one writer of the harness."""

import json
import os
from typing import Any


def write_json_atomic(path: str, value: Any, **dump_kwargs: Any) -> None:
  """Writes JSON through a temporary file, so a reader never sees half of it.

  Arrays and numpy scalars are written as lists and Python numbers.
  """
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(value, f, default=json_default, **dump_kwargs)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def json_default(value: Any) -> Any:
  """``json.dump``'s default: arrays and numpy scalars as lists and numbers."""
  if hasattr(value, "tolist"):
    return value.tolist()
  raise TypeError(f"cannot write {type(value).__name__} as JSON.")
