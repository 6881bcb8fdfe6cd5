"""Next-item examples (Ning et al.): previous movies as context, the next as label.

Each user's ratings are sorted by time (ties keep file order). Every rating
after the first becomes one example: the label is that movie, the context the
up to `context_length` movies before it, oldest first, right-padded with 0.
Items are renumbered 1..V in id order over the item catalogue, so 0 is free
for padding.

Federated: users are split by sorted user id into train/validation/test
clients (80/10/10 by default), each user one client. Centralized: all examples
pooled, shuffled with a seed and split by example, as in the paper.
"""

import dataclasses

import numpy as np
import pandas as pd
import tensorflow_federated as tff

from tff_rec import settings
from tff_rec.data import item_lists

Examples = dict[str, np.ndarray]  # 'context': [N, L] int32, 'label': [N] int32


@dataclasses.dataclass(frozen=True)
class NextItemConfig:
  context_length: int = 10
  min_timeline_length: int = 3  # users with fewer ratings make no examples
  max_examples_per_user: int = settings.described(
      300, "Cap on each user's examples, the earliest kept (0: none).")
  train_fraction: float = 0.8
  validation_fraction: float = 0.1

  def __post_init__(self):
    if self.context_length < 1:
      raise ValueError(f'context_length must be >= 1, got {self.context_length}')
    if self.max_examples_per_user < 0:
      raise ValueError('max_examples_per_user must be >= 0 (0 means no cap), '
                       f'got {self.max_examples_per_user}')
    if not (0 < self.train_fraction and 0 <= self.validation_fraction
            and self.train_fraction + self.validation_fraction < 1):
      raise ValueError(
          'need 0 < train_fraction, 0 <= validation_fraction and their sum < 1 '
          f'(the rest is test); got {self.train_fraction}, '
          f'{self.validation_fraction}')


@dataclasses.dataclass(frozen=True)
class UserExamples:
  """All examples, grouped by user: rows of `user` are sorted."""
  user: np.ndarray  # [N] int64, original user id
  context: np.ndarray  # [N, L] int32
  label: np.ndarray  # [N] int32
  vocab_size: int  # V; ids run 1..V

  def select(self, mask: np.ndarray) -> Examples:
    return {'context': self.context[mask], 'label': self.label[mask]}


def ratings_from_sequences(sequences: item_lists.Sequences) -> pd.DataFrame:
  """Time-ordered item sequences as ratings whose timestamp is the position."""
  return pd.DataFrame({
      'user_id': np.repeat(sequences.user_ids, sequences.lists.counts),
      'item_id': sequences.lists.items,
      'timestamp': sequences.lists.positions})


def item_vocabulary(item_ids: np.ndarray) -> pd.Index:
  """Maps catalogue item ids to 1..V (position in the index + 1)."""
  return pd.Index(np.unique(item_ids))


def make_examples(ratings: pd.DataFrame, vocabulary: pd.Index,
                  config: NextItemConfig) -> UserExamples:
  """Builds every user's sliding-window examples, vectorised."""
  codes = vocabulary.get_indexer(ratings['item_id'])
  if (codes < 0).any():
    raise ValueError('ratings refer to items outside the vocabulary: '
                     f'{ratings["item_id"][codes < 0].unique()[:5]}')
  order = np.lexsort((ratings['timestamp'].to_numpy(), ratings['user_id'].to_numpy()))
  users = ratings['user_id'].to_numpy()[order]
  items = (codes[order] + 1).astype(np.int32)

  starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
  lengths = np.diff(np.r_[starts, len(users)])
  position = np.arange(len(users)) - np.repeat(starts, lengths)
  timeline_length = np.repeat(lengths, lengths)
  keep = (position >= 1) & (timeline_length >= config.min_timeline_length)
  if config.max_examples_per_user:
    keep &= position <= config.max_examples_per_user

  rows = np.flatnonzero(keep)
  window = np.minimum(position[rows], config.context_length)
  offsets = np.arange(config.context_length)
  source = (rows - window)[:, None] + offsets
  context = np.where(offsets < window[:, None],
                     items[np.minimum(source, len(items) - 1)], 0)
  return UserExamples(user=users[rows], context=context.astype(np.int32),
                      label=items[rows], vocab_size=len(vocabulary))


def split_users(user_ids: np.ndarray, config: NextItemConfig
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Splits sorted unique user ids into train/validation/test, in id order."""
  ids = np.unique(user_ids)
  n_train = int(len(ids) * config.train_fraction)
  n_val = int(len(ids) * config.validation_fraction)
  return ids[:n_train], ids[n_train:n_train + n_val], ids[n_train + n_val:]


PARTS = ('train', 'validation', 'test')


@dataclasses.dataclass(frozen=True)
class FederatedSplit:
  """Users split into train/validation/test clients, each user one client."""
  examples: UserExamples
  users: dict[str, np.ndarray]  # 'train' | 'validation' | 'test' -> user ids

  @property
  def vocab_size(self) -> int:
    return self.examples.vocab_size

  def row_ranges(self, part: str) -> dict[str, tuple[int, int]]:
    """Client id -> (first row, number of rows) of its examples, for `part`."""
    users = self.users[part]
    starts, ends = np.searchsorted(self.examples.user, [users, users + 1])
    return {str(u): (int(a), int(b - a)) for u, a, b in zip(users, starts, ends) if b > a}

  def client_data(self, part: str) -> tff.simulation.datasets.ClientData:
    """One client per user of `part`, holding its examples in time order."""
    ex = self.examples
    slices = {client: {'context': ex.context[a:a + n], 'label': ex.label[a:a + n]}
              for client, (a, n) in self.row_ranges(part).items()}
    # TestClientData is TFF's in-memory ClientData (a dict of tensor slices).
    return tff.simulation.datasets.TestClientData(slices)

  def pooled(self, part: str) -> Examples:
    """Every example of the users of `part`, for centralized evaluation."""
    return self.examples.select(np.isin(self.examples.user, self.users[part]))


def federated_split(examples: UserExamples, config: NextItemConfig) -> FederatedSplit:
  train, val, test = split_users(examples.user, config)
  return FederatedSplit(examples, dict(zip(PARTS, (train, val, test))))


@dataclasses.dataclass(frozen=True)
class CentralizedSplit:
  train: Examples
  validation: Examples
  test: Examples
  vocab_size: int


def centralized_split(examples: UserExamples, config: NextItemConfig, *,
                      seed: int) -> CentralizedSplit:
  """All examples shuffled with `seed` and split by example (the paper's)."""
  order = np.random.default_rng(seed).permutation(len(examples.label))
  n_train = int(len(order) * config.train_fraction)
  n_val = int(len(order) * config.validation_fraction)
  parts = np.split(order, [n_train, n_train + n_val])
  masks = []
  for part in parts:
    mask = np.zeros(len(order), dtype=bool)
    mask[part] = True
    masks.append(mask)
  # Boolean masks keep each part in (user, time) order; training shuffles.
  return CentralizedSplit(*(examples.select(m) for m in masks), examples.vocab_size)

