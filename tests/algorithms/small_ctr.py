"""The small CTR run the algorithms' maths tests share: a CTR file whose clients
hold unequal numbers of examples (tests.fixtures.write_ctr_file), LR over its
item and genre columns, launch.train's flags for it."""

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
