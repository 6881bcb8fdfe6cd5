"""The reproduction scripts' line plots: one size, one style, written headless."""

import pathlib

import matplotlib
matplotlib.use('Agg')  # no display: files only
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top


def figure():
  """(figure, axes) of the common size."""
  return plt.subplots(figsize=(7, 4.5))


def save(fig, ax, path: pathlib.Path, *, xlabel: str, ylabel: str, title: str,
         legend_columns: int = 1) -> None:
  """Labels, legend and grid, then writes `path` and frees the figure."""
  # axhline re-fits the view only when its level lies outside it, so a level just inside
  # the edge gets no margin and sits on the frame: fit every artist once more.
  ax.autoscale_view()
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.legend(fontsize=7, ncol=legend_columns)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
