"""Synthetic data files for benchmarks and the tests that check what they measure."""

import pathlib

import numpy as np


def write_din_clicks(path: pathlib.Path, num_users: int, rows_per_user: int, *,
                     num_items: int = 2000, seed: int = 0) -> pathlib.Path:
  """A DIN CTR file (label,user,item,history), no header: each user's rows a click
  or not on an item, its history every item the user met before (so histories
  grow to rows_per_user - 1 items, as a long export's do)."""
  rng = np.random.default_rng(seed)
  lines = []
  for user in range(num_users):
    items = rng.integers(1, num_items, size=rows_per_user)
    labels = rng.random(rows_per_user) < 0.5
    for k in range(rows_per_user):
      history = ','.join(map(str, items[:k]))
      lines.append(f'{int(labels[k])},u{user},{items[k]},"{history}"')
  path.write_text('\n'.join(lines) + '\n')
  return path
