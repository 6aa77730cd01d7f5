"""The module paths of jaxpapers 0.1, kept for one release with a DeprecationWarning.

Since 0.2 every area's implementation modules are private (``_name.py``) and
the area re-exports a flat list of public names (``__all__``), as optax and
equinox do. Code written for 0.1 imported those modules by their public
paths: ``from jaxpapers.optim.ema_nesterov import ema_nesterov_eval_params``,
``from jaxpapers.auctions import ppo`` then ``ppo.train``. Those paths still
work until 0.3: importing ``jaxpapers.<area>.<name>`` gives a module that
forwards every attribute to ``jaxpapers.<area>._<name>`` and warns once, at
the import, with the replacement (CHANGELOG.md lists the renamed names).

Two details keep the areas' public names what ``__all__`` says they are:

* an old path's module is never bound as an attribute of its area, so
  ``jaxpapers.optim.ema_nesterov`` stays the function after someone imports
  the path ``jaxpapers.optim.ema_nesterov``;
* ``jaxpapers.<area>.<name>``, read as an attribute when ``name`` is not a
  public name, imports the old path (with its warning), so
  ``import jaxpapers.auctions.ppo; jaxpapers.auctions.ppo.train`` keeps working.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings

_PACKAGE = __name__.rpartition(".")[0]
_IMPORT_MACHINERY = (os.path.dirname(importlib.__file__), __file__)


# Classes renamed in their modules in 0.2 (their 0.1 names were ambiguous once
# flat); the functions renamed in 0.2 keep their names in their modules.
_RENAMED_CLASSES = {
    f"{_PACKAGE}.auctions._ppo": {"Batch": "PPOBatch"},
    f"{_PACKAGE}.auctions._myopic": {"Episode": "MyopicEpisode"},
    f"{_PACKAGE}.rl._shell": {"Layout": "ShellLayout"},
}


class OldPath(types.ModuleType):
  """A 0.1 module path: every attribute is read from the private module."""

  def __init__(self, name: str, private: types.ModuleType):
    super().__init__(name, private.__doc__)
    self._private = private

  def __getattr__(self, attr: str):
    renamed = _RENAMED_CLASSES.get(self._private.__name__, {})
    return getattr(self._private, renamed.get(attr, attr))

  def __dir__(self) -> list[str]:
    return dir(self._private)


def _caller_stacklevel() -> int:
  """``stacklevel`` for ``warnings.warn`` that names the importing code.

  Counted from the caller's frame (level 1) over the frames that ``warnings``
  counts: it already steps over ``importlib._bootstrap``'s, not over
  ``importlib.import_module`` or this file's.
  """
  frame, level = sys._getframe(1), 1  # pylint: disable=protected-access
  while frame is not None and frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
    frame = frame.f_back
    while frame is not None and _bootstrap_frame(frame):
      frame = frame.f_back
    level += 1
  return level


def _bootstrap_frame(frame) -> bool:  # as ``warnings`` tells its internal frames
  filename = frame.f_code.co_filename
  return "importlib" in filename and "_bootstrap" in filename


class _Loader(importlib.abc.Loader):

  def __init__(self, private_name: str):
    self._private_name = private_name

  def create_module(self, spec):
    return OldPath(spec.name, importlib.import_module(self._private_name))

  def exec_module(self, module):
    area = module.__name__.rpartition(".")[0]
    warnings.warn(
        f"{module.__name__} is deprecated since jaxpapers 0.2 and goes in 0.3: import"
        f" its public names from {area} (see {area}.__all__; CHANGELOG.md lists the"
        " renamed ones).", DeprecationWarning, stacklevel=_caller_stacklevel())


class _Finder(importlib.abc.MetaPathFinder):
  """Finds ``jaxpapers.<area>.<name>`` where ``jaxpapers/<area>/_<name>.py`` exists."""

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    parts = fullname.split(".")
    if (len(parts) != 3 or parts[0] != _PACKAGE or parts[2].startswith("_")
        or f"{parts[0]}.{parts[1]}" not in sys.modules):
      return None
    private_name = f"{parts[0]}.{parts[1]}._{parts[2]}"
    if importlib.util.find_spec(private_name) is None:
      return None
    return importlib.machinery.ModuleSpec(fullname, _Loader(private_name))


class Area(types.ModuleType):
  """An area package: old paths are reachable as attributes but never bound."""

  def __setattr__(self, name, value):
    if isinstance(value, OldPath):
      return  # the import system binds a submodule to its parent; not this one
    super().__setattr__(name, value)

  def __getattr__(self, name):
    if name.startswith("_") or importlib.util.find_spec(
        f"{self.__name__}._{name}") is None:
      raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{self.__name__}.{name}")


def install(area_name: str) -> None:
  """Makes ``area_name`` (an area's ``__name__``) an :class:`Area`."""
  sys.modules[area_name].__class__ = Area


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
  sys.meta_path.append(_Finder())
