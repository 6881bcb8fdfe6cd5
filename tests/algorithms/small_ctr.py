"""The small CTR run the algorithms' maths tests share: a CTR file whose clients
hold unequal numbers of examples (tests.fixtures.write_ctr_file), LR over its
item and genre columns, launch.train's flags for it."""

import numpy as np

from tests import fixtures

COUNTS = (3, 6, 10, 17, 9, 4)  # training examples per client: unequal weights
COLUMNS = ('item', 'genre')
CLIENT_RATE = 0.5


def write(folder):
  return fixtures.write_ctr_file(folder / 'clicks.csv', COUNTS)


def flags(path, **settings) -> list[str]:
  """launch.train's flags for `path` with LR, batches of 4, 2 local epochs, 2
  rounds of 4 clients; `settings` add or replace flags (None drops one)."""
  values = dict(task='ctr', data_dir=path, model='lr', client_column='user',
                feature_columns=','.join(COLUMNS), test_column='test', batch_size=4,
                local_epochs=2, rounds=2, clients_per_round=4, eval_every=0,
                client_learning_rate=CLIENT_RATE, seed=3)
  values.update(settings)
  return [f'--{k}={v}' for k, v in values.items() if v is not None]


def row_scales(task, heat: str, bound: float | None, columns=COLUMNS) -> list[np.ndarray]:
  """FedSubAvg's N / n_m per row of each column's table (1 where no client's data
  reach a row): n_m the training clients whose examples index row m ('clients'),
  or their examples ('examples'); N all of them."""
  clients = [task.client_examples(c) for c in task.train_client_ids]
  sizes = np.array([len(e['label']) for e in clients], np.float64)
  weights = sizes if heat == 'examples' else np.ones(len(clients))
  scales = []
  for column in columns:
    n = np.zeros(task.examples.vocab_sizes[column])
    for examples, weight in zip(clients, weights):
      n[np.unique(examples[column])] += weight
    scale = np.where(n > 0, weights.sum() / np.maximum(n, 1e-9), 1.0)
    scales.append(scale if bound is None else np.minimum(scale, bound))
  return scales
