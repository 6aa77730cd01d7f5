"""The figure pieces every binary draws: a mean +- s.e. band, bars with error bars.

A figure is drawn inside ``with workdir.figure(name, title=...) as axes:``
(:meth:`experiments.harness.Workdir.figure`), which saves it and lists it in
the report; these helpers draw into one of its panels.
"""

from typing import Any, Sequence

import numpy as np


def _floats(values: Sequence[Any]) -> np.ndarray:
  return np.asarray([np.nan if v is None else v for v in values], np.float64)


def band(ax: Any, x: Sequence[float], mean: Sequence[float],
         se: Sequence[float | None] | None = None, *, alpha: float = 0.15,
         **plot_kwargs: Any) -> Any:
  """Plots ``mean`` against ``x`` with a shaded ``mean +- se`` band; returns the line.

  ``se`` None (one seed) draws the line alone; a None entry leaves a gap in
  the band. ``plot_kwargs`` go to ``ax.plot`` (format string as ``fmt``).
  """
  fmt = plot_kwargs.pop("fmt", "-")
  x, mean = _floats(x), _floats(mean)
  (line,) = ax.plot(x, mean, fmt, **plot_kwargs)
  if se is not None:
    se = _floats(se)
    ax.fill_between(x, mean - se, mean + se, color=line.get_color(),
                    alpha=alpha, lw=0)
  return line


def bars(ax: Any, labels: Sequence[str], means: Sequence[float],
         ses: Sequence[float | None] | None = None, *,
         ylabel: str | None = None) -> None:
  """One bar per label (its own colour) with ``+- se`` error bars; labels slanted."""
  x = np.arange(len(labels))
  ax.bar(x, _floats(means), yerr=None if ses is None else np.nan_to_num(
      _floats(ses)), color=[f"C{i % 10}" for i in x])
  ax.set_xticks(x, list(labels), rotation=30, ha="right", fontsize=8)
  if ylabel is not None:
    ax.set_ylabel(ylabel)
