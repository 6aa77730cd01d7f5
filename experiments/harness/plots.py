"""The figure pieces every binary draws: a mean +- s.e. band, bars with error bars.

A figure is drawn inside ``with workdir.figure(name, title=...) as axes:``
(:meth:`experiments.harness.Workdir.figure`), which saves it and lists it in
the report; these helpers draw into one of its panels.
:func:`overlapping_texts` finds the labels that a saved figure would print
over one another.
"""

import itertools
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


def overlapping_texts(fig: Any, tolerance: float = 1.0
                      ) -> list[tuple[str, str]]:
  """The pairs of visible texts of ``fig`` overlapping by over ``tolerance`` px.

  Draws the figure, then compares the suptitle and figure texts, every
  panel's title, axis labels, tick labels in view and legend texts (empty
  ones skipped). A rotated text is compared as its rotated box, not its
  window extent: slanted tick labels side by side have overlapping extents
  without touching.
  """
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  texts, legends = list(fig.texts), list(fig.legends)
  for ax in fig.axes:
    if not ax.get_visible():
      continue
    texts.append(ax.title)
    legends.append(ax.get_legend())
    for axis in (ax.xaxis, ax.yaxis) if ax.axison else ():
      # An axis also keeps ticks (and labels) outside its view: never drawn.
      view = sorted(axis.get_view_interval())
      texts += [text for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                if view[0] <= tick.get_loc() <= view[1]
                or np.isclose(tick.get_loc(), view).any()
                for text in (tick.label1, tick.label2)] + [axis.label]
  for legend in filter(None, legends):
    texts += [*legend.get_texts(), legend.get_title()]
  boxes = [(t.get_text(), _rotated_box(t, renderer)) for t in texts
           if t.get_visible() and t.get_text().strip()]
  return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
          if _boxes_overlap(box_a, box_b, tolerance)]


def _rotated_box(text: Any, renderer: Any) -> tuple[np.ndarray, np.ndarray]:
  """A text's box: its corners (4 x 2, px) and its two edge directions."""
  rotation, extent = text.get_rotation(), text.get_window_extent(renderer)
  centre, (width, height) = extent.corners().mean(axis=0), extent.size
  if rotation % 180:
    text.set_rotation(0)  # the unrotated size; rotating keeps the centre
    width, height = text.get_window_extent(renderer).size
    text.set_rotation(rotation)
  c, s = np.cos(np.deg2rad(rotation)), np.sin(np.deg2rad(rotation))
  edges = np.array([[c, s], [-s, c]])
  half = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [width, height] / 2
  return centre + half @ edges, edges


def _boxes_overlap(a: tuple[np.ndarray, np.ndarray],
                   b: tuple[np.ndarray, np.ndarray], tolerance: float) -> bool:
  """Separating axes: boxes overlap iff they do along every edge direction."""
  for direction in np.concatenate([a[1], b[1]]):
    along_a, along_b = a[0] @ direction, b[0] @ direction
    if (min(along_a.max(), along_b.max())
        - max(along_a.min(), along_b.min())) <= tolerance:
      return False
  return True
