"""Every task family reads every bundled dataset (../shared/data), or refuses it
naming the flags that make it work: the family x dataset grid (issue 81).

Each cell builds the task as the trainer does and checks counts the data fix:
e.g. leave-one-out on Goodreads-100's pair holds 689,614 - 2 x 99 interactions
for training (its train.txt then test.txt, each user's last two held out)."""

import pytest

import tasks
from tests import conftest

# (family, dataset, settings) -> what the task's description must say.
READ = {
    ('ranking', 'ml-100k'): '943 users, 1683 items, 69575 train / 30425 test interactions',
    ('ranking', 'goodreads-100'): '99 users, 359014 items, 482745 train / 206869 test',
    ('ranking', 'amazon-beauty'): '22363 users, 12102 items, 128547 train / 69955 test',
    ('loo_ranking', 'ml-100k'): '943 users, 1682 items, 98114 train positives',
    ('loo_ranking', 'goodreads-100'): '99 users, 357638 items, 689416 train positives',
    ('loo_ranking', 'amazon-beauty'): '1248 users, 21115 users with < 20 items skipped',
    ('next_item', 'ml-100k'): '1682 items',
    ('next_item', 'goodreads-100'): '357638 items',
    ('next_item', 'amazon-beauty'): '12101 items',
    ('ctr', 'ml-100k'): '943 clients, 89561 train / 10439 test examples',
    ('ctr', 'goodreads-100'): '99 clients, 1378832 train / 198 test examples',
    ('ctr', 'amazon-beauty'): '22363 clients, 307552 train / 44726 test examples',
}
CRITEO = 'ctr-samples/criteo_sample.txt'
CRITEO_AS_CTR_FILE = dict(client_column='C1', feature_columns=tuple(f'C{k}' for k in range(2, 27)),
                          split='random')
# Criteo has no user and item: the interaction families name the flags that say which.
REFUSED = {family: 'criteo_sample.txt:1: non-integer field; expected one line per user: '
           '"uid item item ..." (space-separated integers) (a CSV / TSV of interactions: '
           'declare its user_column and item_column)'
           for family in ('ranking', 'loo_ranking', 'next_item')}
REFUSED['ctr'] = ('or, a CTR file (one example a line, a header or --columns): declare its '
                  '--client_column and --feature_columns')
SLOW = {('ctr', 'goodreads-100'): 14, ('ctr', 'amazon-beauty'): 4}


def _data(dataset: str):
  path = conftest.SHARED_DATA / dataset
  if not path.exists():
    conftest.skip_outside_ci(f'real dataset {dataset} not found at {path}')
  return path


def _task(family: str, data_dir, **settings):
  module = tasks.module(family)
  return module.Task(module.make_config(data_dir=str(data_dir), **settings))


@pytest.mark.parametrize('family, dataset', [
    pytest.param(*cell, marks=[pytest.mark.slow(seconds=SLOW[cell])] if cell in SLOW else [])
    for cell in READ])
def test_each_family_reads_each_dataset(family, dataset):
  assert READ[family, dataset] in _task(family, _data(dataset)).describe()


@pytest.mark.parametrize('family', sorted(REFUSED))
def test_criteo_is_refused_naming_the_flags_that_read_it(family):
  with pytest.raises(ValueError) as refusal:
    _task(family, _data(CRITEO))
  assert REFUSED[family] in str(refusal.value)


def test_criteo_is_read_as_a_ctr_file_with_those_flags():
  assert '160 train / 40 test examples (random split)' in _task(
      'ctr', _data(CRITEO), **CRITEO_AS_CTR_FILE).describe()
