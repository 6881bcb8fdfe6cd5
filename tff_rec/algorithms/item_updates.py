"""How a client's item-table update is shaped, sent and merged: FedMF's full
update, CoLR's and SCoLR's correlated low-rank factor, and the SVD and top-k
compressions CoLR compares against.

* full: the client trains the whole table and sends its change (n x d).
* colr (Nguyen et al.): the client trains A (n x r, from zero) in W + A B, B an
  r x d matrix drawn by the server from the round's seed, identical for every
  client of the round and frozen; it sends A. Since B is shared, the mean
  update is mean(A) B: the aggregate is a plain sum of the payloads.
* scolr: B has the global rank R; each client trains only r_i <= R of its
  rows, the first r_i of a permutation shared by the round, and sends those
  columns of A (the others are zero). Still a plain sum.
* svd: the client trains the whole table, sends the rank-r SVD factors of its
  change; the server compresses the mean change to rank r again for the
  download (the official code compresses both ways).
* topk: as svd, keeping the k largest-magnitude entries (value + index).
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf

from tff_rec import settings
from tff_rec.algorithms import api
from tff_rec.algorithms import capacities
from tff_rec.models import mf

FORMS = ('full', 'colr', 'scolr', 'svd', 'topk')
COMPRESSED = FORMS[1:]  # each a registered algorithm (table_updates, fedmf)
LOW_RANK = ('colr', 'scolr')  # the client trains A in W + A B
BYTES_PER_FLOAT = 4
BYTES_PER_INDEX = 4   # int32 entry indices of a top-k payload
BYTES_PER_SEED = 8    # the round seed from which clients draw B


@dataclasses.dataclass(frozen=True)
class UpdateForm:
  """An update form and its rank (colr, svd: r; scolr: the global R; topk: the
  payload of a rank-r factor, n * r / 2 entries of value + index)."""
  name: str = 'full'
  rank: int = 0

  def validate(self, dim: int) -> None:
    if self.name not in FORMS:
      raise ValueError(f'unknown update form {self.name!r}; choose one of {FORMS}')
    if self.name != 'full' and not 1 <= self.rank <= dim:
      raise ValueError(f'rank must be in 1..{dim} (the embedding dimension) for '
                       f'{self.name}, got {self.rank}')

  @property
  def columns(self) -> int | None:
    """Width of the trained factor A (None: the client trains the table itself)."""
    return self.rank if self.name in LOW_RANK else None

  def top_k(self, num_items: int) -> int:
    return max(1, num_items * self.rank // 2)


def low_rank_columns(form: UpdateForm, permutation_seed: tf.Tensor, local_rank: tf.Tensor
                     ) -> tf.Tensor:
  """[rank] 1.0 for the columns of A a client trains: scolr's first `local_rank` of
  a permutation drawn from the round's `permutation_seed`; every column for colr."""
  if form.name != 'scolr':
    return tf.ones([form.rank])
  position = tf.argsort(tf.argsort(tf.random.stateless_uniform([form.rank], permutation_seed)))
  return tf.cast(position < local_rank, tf.float32)


def low_rank_rows(table: tf.Tensor, factor: tf.Tensor, basis: tf.Tensor, columns: tf.Tensor,
                  ids: tf.Tensor, gather=tf.gather) -> tf.Tensor:
  """CoLR's client side, the one implementation FedMF and the table forms share: the
  rows `ids` of W + (A * columns) B, W frozen and A (from zero) trained, with A's
  gradient scaled by sqrt(r / d) as the official code does (docs/results.md, CoLR).
  `gather`: how rows are read (FedMF's frequency-scaled gather)."""
  rank, dim = basis.shape
  trained = mf.scale_gradient(factor * columns, math.sqrt(rank / dim))
  return gather(table, ids) + tf.matmul(gather(trained, ids), basis)


def svd_compress(matrix: tf.Tensor, rank: int) -> tf.Tensor:
  """The best rank-r approximation of `matrix` (what its SVD factors decode to)."""
  s, u, v = tf.linalg.svd(matrix)
  return tf.matmul(u[:, :rank] * s[:rank], v[:, :rank], transpose_b=True)


def top_k_compress(matrix: tf.Tensor, k: int) -> tf.Tensor:
  """`matrix` with all but its k largest-magnitude entries set to zero."""
  flat = tf.reshape(matrix, [-1])
  kept = tf.math.top_k(tf.abs(flat), k).indices
  return tf.reshape(tf.scatter_nd(kept[:, None], tf.gather(flat, kept), tf.shape(flat)),
                    tf.shape(matrix))


def compress(form: UpdateForm, update: tf.Tensor) -> tf.Tensor:
  """What a full-table update decodes to after the form's compression."""
  if form.name == 'svd':
    return svd_compress(update, form.rank)
  if form.name == 'topk':
    return top_k_compress(update, form.top_k(update.shape[0]))
  return update


def payload_bytes(form: UpdateForm, num_items: int, dim: int) -> dict[str, int]:
  """Bytes per client per round: 'up' (for scolr: per column trained),
  'down_update' (the round's global update, for a client that holds the
  previous model) and 'down_model' (the whole table, for any client)."""
  table = num_items * dim * BYTES_PER_FLOAT
  factor = num_items * form.rank * BYTES_PER_FLOAT
  if form.name in LOW_RANK:
    # Up: A (scolr: its trained columns). Down: the previous round's mean A
    # and seed, then this round's seed.
    up = num_items * BYTES_PER_FLOAT if form.name == 'scolr' else factor
    return dict(up=up, down_update=factor + 2 * BYTES_PER_SEED,
                down_model=table + BYTES_PER_SEED)
  if form.name == 'svd':
    factors = form.rank * (num_items + dim) * BYTES_PER_FLOAT
    return dict(up=factors, down_update=factors, down_model=table)
  if form.name == 'topk':
    entries = form.top_k(num_items) * (BYTES_PER_FLOAT + BYTES_PER_INDEX)
    return dict(up=entries, down_update=entries, down_model=table)
  return dict(up=table, down_update=table, down_model=table)


ITEM_AVERAGES = ('cohort', 'touched')
USER_STATES = ('stored', 'reconstructed')


def check_item_average(item_average: str) -> None:
  if item_average not in ITEM_AVERAGES:
    raise ValueError(f'unknown item_average {item_average!r}; choose one of {ITEM_AVERAGES}')


@dataclasses.dataclass(frozen=True)
class Options:
  rank: int = settings.described(
      4, 'colr / svd: the rank r of the item update; scolr: the global rank R; topk: keep as '
      'many entries as a rank-r factor has bytes (default 4).')
  local_ranks: str | None = settings.described(
      None, "scolr: each client group's local rank, e.g. 1-2-4 (clients in id order, equal "
      'groups); default: uniform in 1..R, drawn every round.')
  item_average: str = settings.described(
      'cohort', "The server's mean of an item's update: over the cohort (the paper's FedAvg) or "
      'over the clients whose data touched the item (the official code) (default cohort).',
      choices=ITEM_AVERAGES)
  secure_sum_bound: float = settings.described(
      0.0, "Sum the clients' payloads with TFF's secure sum, each value clipped to +-bound (0: "
      'plain sum; default 0). Same as --aggregator=secure --secure_bound=B.')
  # A matrix factorization's private user vectors (FedMF's round, fedmf.py).
  user_state: str = settings.described(
      'stored', "A client's private user vector: kept between the rounds it joins, or "
      'reconstructed every round and at evaluation (default stored).', choices=USER_STATES)
  reconstruction_epochs: int = settings.described(
      1, 'Epochs fitting a reconstructed user vector with the items frozen, before the local '
      'epochs (default 1).')

  def __post_init__(self):
    check_item_average(self.item_average)
    if self.secure_sum_bound < 0:
      raise ValueError(f'secure_sum_bound must be >= 0, got {self.secure_sum_bound}')
    if self.user_state not in USER_STATES:
      raise ValueError(f'unknown user_state {self.user_state!r}; choose one of {USER_STATES}')
    if self.reconstruction_epochs < 1:
      raise ValueError(f'reconstruction_epochs must be >= 1, got {self.reconstruction_epochs}')
    settings.refuse_unused(self, 'reconstruction_epochs', self.user_state == 'reconstructed',
                           'to user_state=reconstructed')

  @property
  def extra_epochs(self) -> int:
    """Epochs a client's data holds before its local epochs: reconstruction's."""
    return 0 if self.user_state == 'stored' else self.reconstruction_epochs

  def matrix_factorization_only(self) -> list[str]:
    """The options given (not at their defaults) that only FedMF's round reads."""
    return [name for name in ('item_average', 'user_state', 'reconstruction_epochs')
            if getattr(self, name) != getattr(Options, name)]


def local_ranks(options: Options, form: str, num_clients: int, seed: int):
  """(client index, round seed) -> the client's local rank: scolr's (its group's, or
  uniform in 1..R drawn afresh every round); the rank itself for the other forms. Any
  form checks the group ranks against the global rank; the others refuse them."""
  if options.local_ranks is not None and form != 'scolr':
    raise ValueError('--local_ranks applies to scolr only')
  if options.local_ranks is not None:
    try:
      ranks = [int(r) for r in options.local_ranks.split('-')]
    except ValueError:
      raise ValueError(f'local_ranks must look like 1-2-4, got {options.local_ranks!r}'
                       ) from None
    if not all(1 <= r <= options.rank for r in ranks):
      raise ValueError(f'local ranks {ranks} must be in 1..{options.rank} (the global rank '
                       'R); raise --rank or lower them')
  if form != 'scolr':
    return lambda client, round_seed: options.rank
  if options.local_ranks is None:
    return lambda client, round_seed: int(
        np.random.default_rng([round_seed, 1]).integers(1, options.rank + 1))
  groups = capacities.assign(num_clients, len(ranks), seed=seed)
  return lambda client, round_seed: ranks[groups[client]]


def with_secure_sum(options: Options, training):
  """`training` whose aggregator is the secure sum that --secure_sum_bound=B names
  (--aggregator=secure --secure_bound=B), refused beside another aggregator."""
  if not options.secure_sum_bound:
    return training
  if training.aggregator.name != 'mean':
    raise api.NotApplicable(
        f'--secure_sum_bound is the secure sum itself, and --aggregator='
        f'{training.aggregator.name} chooses the aggregation too: give one '
        '(--aggregator=secure --secure_bound=B is --secure_sum_bound=B)')
  return dataclasses.replace(training, aggregator=dataclasses.replace(
      training.aggregator, name='secure', secure_bound=options.secure_sum_bound))


def check_aggregation(options: Options, training, form: str) -> None:
  """Refuses DP's cohort mean where the form divides by the clients that trained a
  row."""
  if training.aggregator.name == 'dp' and (form == 'scolr' or options.item_average != 'cohort'):
    divides = ('scolr divides each column of A by the clients that trained it'
               if form == 'scolr' else '--item_average=touched divides each item by the '
               'clients that touched it')
    raise api.NotApplicable(f'--aggregator=dp averages over the cohort, and {divides}; '
                            'use colr, fedmf, svd or topk with --item_average=cohort')
