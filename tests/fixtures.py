"""Small files in the real dataset formats, made by tests (never the real data)."""

import pathlib
import zipfile

import numpy as np


def _write(path: pathlib.Path, lines, encoding='utf-8') -> None:
  path.write_text(''.join(line + '\n' for line in lines), encoding=encoding)


def synthetic_ratings(num_users: int, num_items: int, *, seed: int = 0,
                      min_ratings: int = 20, max_ratings: int = 60):
  """(user, item, rating, timestamp) rows with per-user sequential tastes."""
  rng = np.random.default_rng(seed)
  rows = []
  for user in range(1, num_users + 1):
    count = int(rng.integers(min_ratings, max_ratings + 1))
    start = int(rng.integers(1, num_items + 1))
    # Users walk through the catalogue in order, so the next item is learnable.
    items = (start + np.arange(count)) % num_items + 1
    for t, item in enumerate(items):
      rows.append((user, int(item), int(rng.integers(1, 6)), 880000000 + 1000 * t))
  return rows


def write_ml100k(root: pathlib.Path, ratings, num_users: int, num_items: int) -> pathlib.Path:
  root.mkdir(parents=True, exist_ok=True)
  _write(root / 'u.data', [f'{u}\t{i}\t{r}\t{t}' for u, i, r, t in ratings])
  _write(root / 'u.user', [f'{u}|{20 + u % 40}|{"MF"[u % 2]}|student|{10000 + u}'
                           for u in range(1, num_users + 1)])
  genres = ['0'] * 19
  _write(root / 'u.item', [
      f'{i}|Movie {i} (1995)|01-Jan-1995||http://x/{i}|' + '|'.join(
          genres[:i % 19] + ['1'] + genres[i % 19 + 1:])
      for i in range(1, num_items + 1)], encoding='latin-1')
  return root


def write_ml1m(root: pathlib.Path, ratings, num_users: int, num_items: int) -> pathlib.Path:
  root.mkdir(parents=True, exist_ok=True)
  _write(root / 'ratings.dat', [f'{u}::{i}::{r}::{t}' for u, i, r, t in ratings])
  _write(root / 'users.dat', [f'{u}::{"MF"[u % 2]}::{18 + u % 40}::{u % 20}::{10000 + u}'
                              for u in range(1, num_users + 1)])
  _write(root / 'movies.dat', [f'{i}::Movie {i} (1995)::Comedy|Drama'
                               for i in range(1, num_items + 1)], encoding='latin-1')
  return root


def zip_dir(directory: pathlib.Path, archive: pathlib.Path) -> pathlib.Path:
  with zipfile.ZipFile(archive, 'w') as zf:
    for path in sorted(directory.iterdir()):
      zf.write(path, f'{directory.name}/{path.name}')
  return archive


def write_user_items(root: pathlib.Path, train: dict[int, list[int]],
                     test: dict[int, list[int]] | None = None) -> pathlib.Path:
  """FAIR's layout (train.txt + test.txt), or one sequence file when test is None."""
  root.mkdir(parents=True, exist_ok=True)
  if test is None:
    _write(root / 'sequences.txt', [' '.join(map(str, [u, *items])) for u, items in train.items()])
  else:
    for name, lists in (('train.txt', train), ('test.txt', test)):
      _write(root / name, [' '.join(map(str, [u, *items])) for u, items in lists.items()])
  return root


def synthetic_user_items(num_users: int, num_items: int, *, seed: int = 0,
                         per_user: int = 12) -> tuple[dict, dict]:
  """Users in two taste groups (low / high item ids); 2/3 train, 1/3 test."""
  rng = np.random.default_rng(seed)
  train, test = {}, {}
  for user in range(num_users):
    half = num_items // 2
    pool = np.arange(half) + (half if user % 2 else 0)
    items = rng.choice(pool, size=per_user, replace=False)
    train[user], test[user] = items[:2 * per_user // 3].tolist(), items[2 * per_user // 3:].tolist()
  return train, test


def write_ctr_file(path: pathlib.Path, train_counts, *, num_items: int = 120,
                   seed: int = 0) -> pathlib.Path:
  """A CTR file (label,user,item,genre,test), a user per client with
  `train_counts[k]` training rows and 2 test rows (one click, one not): user k
  clicks items of its own window, which overlaps its neighbours' (rows of
  several heats), and every item appears (a table of num_items + 1 rows)."""
  rng = np.random.default_rng(seed)
  lines = ['label,user,item,genre,test']
  window = max(2, num_items // len(train_counts))
  for user, count in enumerate(train_counts):
    items = (user * window + rng.integers(0, 2 * window, size=count + 2)) % num_items
    labels = rng.random(count + 2) < 0.3 + 0.4 * (user % 2)
    labels[-2:] = [True, False]
    for k, (item, label) in enumerate(zip(items, labels)):
      lines.append(f'{int(label)},u{user},i{item:03d},g{item % 7},{int(k >= count)}')
  lines += [f'0,u0,i{item:03d},g{item % 7},1' for item in range(num_items)]  # every item
  _write(path, lines)
  return path
