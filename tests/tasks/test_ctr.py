"""MovieLens CTR task: heat, FedSubAvg vs FedAvg rounds, baselines, evaluation."""

import re

import numpy as np
import pytest
import tensorflow as tf

from experiments import synthetic
from tasks import ctr as task_lib
from tff_rec import metrics
from tff_rec import objectives
from tff_rec import registry
from tff_rec.algorithms import api
from tff_rec.algorithms import heat as heat_lib
from tff_rec.data import item_lists
from tff_rec.data import sequence_clicks
from tff_rec.runtime import inprocess
from tff_rec.training import loop
from tff_rec.training import optimizers

SGD = optimizers.OptimizerConfig('sgd', 0.5)
SERVER = optimizers.OptimizerConfig('sgd', 1.0)


@pytest.fixture
def lr_task(ml100k_dir):
  return task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), model='lr',
                                       local_steps=3, batch_size=8))


def _build(task, algorithm, *, client=SGD, server=SERVER, runtime='native', **options):
  built = registry.build(algorithm, task, registry.Training(client, server, runtime=runtime),
                         **options)
  return built.process, built.client_ids, built.client_input


def _round(task, algorithm, cohort, server=SERVER, **options):
  process, _, client_input = _build(task, algorithm, server=server, **options)
  state = process.initialize()
  before = [np.array(v) for v in process.get_model_weights(state).trainable]
  output = process.next(state, [client_input(c, 7) for c in cohort])
  after = [np.array(v) for v in process.get_model_weights(output.state).trainable]
  return [a - b for a, b in zip(after, before, strict=True)], output.metrics


def test_heat_counts_the_clients_whose_training_rows_hold_each_movie(lr_task):
  e = lr_task.examples
  train = ~e.is_test
  movie_heat = heat_lib.heat(lr_task, 'clients')[0]['movie']
  for movie in (1, 7, 40):
    assert movie_heat[movie] == len(np.unique(e.clients[train & (e.features['movie'] == movie)]))
  assert movie_heat[0] == 0
  examples = heat_lib.heat(lr_task, 'examples')[0]['gender']
  assert examples.sum() == train.sum()  # one gender per client: each example counted once
  touched = np.concatenate([h[h > 0] for h in heat_lib.heat(lr_task, 'clients')[0].values()])
  assert lr_task.heat_dispersion() == (touched.max() / touched.min(),
                                                30 / touched.min())


def test_movielens_ratings_file_stands_for_its_folder(lr_task, ml100k_dir):
  by_file = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir / 'u.data'),
                                          model='lr', batch_size=8))
  assert by_file.train_client_ids == lr_task.train_client_ids
  client = lr_task.train_client_ids[0]
  for column, values in lr_task.client_examples(client).items():
    np.testing.assert_array_equal(by_file.client_examples(client)[column], values)


def test_padding_rows_have_no_heat(ml100k_dir):
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), model='din'))
  assert heat_lib.heat(task, 'clients')[0]['movie'][0] == 0  # the history's padding


def test_example_heat_refuses_capped_local_steps(lr_task):
  with pytest.raises(ValueError, match='set --local_steps=0 or --heat=clients'):
    _build(lr_task, 'fedsubavg', heat='examples')


def test_rows_a_client_never_reads_get_exactly_zero_update(ml100k_dir, tff_runtime):
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), model='din',
                                       local_steps=4, batch_size=8))
  client = task.train_client_ids[3]
  features, _ = task.client_arrays.examples(client)
  delta, _ = _round(task, 'fedsubavg', [client])
  for table, d in zip(api.table_of_variable(task), delta, strict=True):
    if table is None:
      continue
    read = np.unique(np.concatenate([features[c].reshape(-1) for c in task.spec.tables[table]]))
    changed = np.flatnonzero(np.any(d != 0, axis=1))
    assert set(changed) <= set(read[read > 0]), table
    assert len(changed) > 0


def test_scaffold_refuses_an_adaptive_client_optimizer(lr_task):
  with pytest.raises(ValueError, match='scaffold takes SGD steps'):
    _build(lr_task, 'scaffold', client=optimizers.OptimizerConfig('adam', 1))


@pytest.mark.slow
@pytest.mark.parametrize('algorithm', ['scaffold', 'fedavg'])
def test_client_state_and_plain_rounds_run_in_process_to_the_native_numbers(
    lr_task, tff_runtime, algorithm):
  states = {}
  for runtime in ('native', 'inprocess'):
    process, ids, client_input = _build(lr_task, algorithm, runtime=runtime)
    states[runtime], _ = loop.run(
        inprocess.for_runtime(process, runtime), client_ids=ids, client_input=client_input,
        schedule=loop.Schedule(rounds=2, clients_per_round=6, eval_every=0),
        evaluate=lambda weights: {})
  for a, b in zip(tf.nest.flatten(states['native']), tf.nest.flatten(states['inprocess']),
                  strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_max_correction_is_fedsubavgs_alone(lr_task):
  with pytest.raises(registry.NotApplicable, match='--max_correction does not apply to '
                     '--algorithm=fedavg'):
    _build(lr_task, 'fedavg', max_correction=4.0)
  with pytest.raises(registry.NotApplicable, match='max_correction must be >= 1'):
    _build(lr_task, 'fedsubavg', max_correction=0.5)
  with pytest.raises(ValueError, match='it needs the fedsubavg stack'):
    registry.Training(max_correction=4.0)


def test_fedadam_refuses_another_server_optimizer(lr_task):
  with pytest.raises(ValueError, match='--algorithm=fedadam: its server optimizer is adam'):
    _build(lr_task, 'fedadam')


def test_fedsubavg_runs_in_process_with_the_same_numbers(lr_task, tff_runtime):
  process, _, client_input = _build(lr_task, 'fedsubavg', runtime='inprocess')
  inputs = [client_input(c, 3) for c in lr_task.train_client_ids[:5]]
  native_state = process.next(process.initialize(), inputs).state
  local = inprocess.InProcessLearningProcess(process)
  local_state = local.next(local.initialize(), inputs).state
  for a, b in zip(process.get_model_weights(native_state).trainable,
                  local.get_model_weights(local_state).trainable, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_evaluation_is_exact_auc_and_logloss(lr_task, tff_runtime):
  process, _, _ = _build(lr_task, 'fedavg')
  weights = process.get_model_weights(process.initialize())
  values = lr_task.evaluate(weights)
  model = lr_task.keras_model()
  weights.assign_weights_to(model)
  for part in ('test', 'train'):
    rows = lr_task.examples.rows(part)
    logits = model(lr_task.examples.take(rows, lr_task.spec.columns)).numpy().reshape(-1)
    labels = lr_task.examples.labels[rows]
    # by hand: the share of ordered (click, non-click) pairs, ties half; mean BCE
    wins = logits[labels == 1][:, None] - logits[labels == 0][None, :]
    auc = np.mean((wins > 0) + 0.5 * (wins == 0))
    bce = np.mean(np.log1p(np.exp(-np.abs(logits))) + np.maximum(logits, 0) - logits * labels)
    if part == 'test':
      assert values['test_auc'] == pytest.approx(auc)
      assert values['test_logloss'] == pytest.approx(bce)
    else:
      assert values['train_loss'] == pytest.approx(bce)


def test_a_validation_part_leaves_training_and_is_scored_beside_test(ml100k_dir):
  plain = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), model='lr'))
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), model='lr',
                                       validation_fraction=0.2))
  e = task.examples
  validation = e.rows('validation')
  np.testing.assert_array_equal(e.rows('test'), plain.examples.rows('test'))
  assert sum(task.client_sizes()) == sum(plain.client_sizes()) - len(validation)
  assert f'{len(validation)} validation / ' in task.describe()
  model = task.keras_model()
  rng = np.random.default_rng(0)
  model.set_weights([rng.normal(size=w.shape) for w in model.get_weights()])
  values = task.objective.evaluate(model)
  logits = objectives.predict(model, task.objective.parts['validation'])
  assert values['validation_auc'] == pytest.approx(metrics.auc(e.labels[validation], logits))
  assert values['validation_logloss'] == pytest.approx(
      metrics.logloss(e.labels[validation], logits))
  assert values['validation_auc'] != pytest.approx(values['test_auc'])
  assert 'validation_auc' not in plain.objective.evaluate(plain.keras_model())
  with pytest.raises(ValueError, match=r'validation_fraction must be in \[0, 1\)'):
    task_lib.Config(validation_fraction=1.0)


@pytest.mark.parametrize('fraction', [0.0, -0.5, 1.0])
def test_a_test_fraction_outside_0_1_is_refused_not_taken_for_the_default(fraction):
  with pytest.raises(ValueError, match=r'test_fraction must be in \(0, 1\), got '):
    task_lib.Config(test_fraction=fraction)
  assert task_lib.Config(test_fraction=0.05).resolved_test_fraction == 0.05


def test_logits_scored_in_chunks_are_every_row_in_order(lr_task, monkeypatch):
  model = lr_task.keras_model()
  rng = np.random.default_rng(0)
  model.set_weights([rng.normal(size=w.shape) for w in model.get_weights()])
  rows = lr_task.examples.rows('train')
  whole = model(lr_task.examples.take(rows, lr_task.spec.columns)).numpy().reshape(-1)
  part = lr_task.objective.parts['train']
  chunk = len(rows) // 3 + 1  # three chunks, the last one shorter
  row_bytes = sum(v.nbytes for v in part.read(np.arange(1), None).values())
  monkeypatch.setattr(objectives, 'EVAL_CHUNK_BYTES', chunk * row_bytes)
  monkeypatch.setattr(objectives, 'EVAL_BATCH_BYTES', 100 * objectives.example_bytes(
      model, part.read(np.arange(2), None)))  # batches of 100
  assert len(rows) % chunk
  np.testing.assert_allclose(objectives.predict(model, part), whole, rtol=1e-5, atol=1e-6)


def test_long_histories_are_evaluated_in_batches_sized_by_their_bytes(tmp_path, monkeypatch,
                                                                     ml100k_dir):
  """DIN on 230-item histories: an example's forward pass costs ~20x one of 10
  items, and its batches shrink to keep EVAL_BATCH_BYTES (8192 of them: 3.2 GB)."""
  path = synthetic.write_din_clicks(tmp_path / 'long.csv', num_users=6, rows_per_user=231)
  task = task_lib.Task(task_lib.make_config(
      data_dir=str(path), model='din', columns=['label', 'user', 'item', 'history'],
      client_column='user', feature_columns=('user', 'item'), list_columns=('history',)))
  short = task_lib.Task(task_lib.make_config(model='din', data_dir=str(ml100k_dir)))  # 10 items
  model, short_model = task.keras_model(), short.keras_model()
  part = task.objective.parts['train']
  costs = [objectives.example_bytes(m, p.read(np.arange(2), None)) for m, p in (
      (model, part), (short_model, short.objective.parts['train']))]
  assert part.read(np.arange(1), None)['history'].shape == (1, 230)
  assert 15 < costs[0] / costs[1] < 25
  some = objectives.in_memory(part.read(np.arange(70), None), part.labels[:70])
  whole = objectives.predict(model, some)  # in one batch
  monkeypatch.setattr(objectives, 'EVAL_BATCH_BYTES', 7 * costs[0])
  # 10 batches: the same to float rounding (oneDNN's kernels for 7 rows sum in
  # another order; at the sizes evaluation picks, ML-100K's models agreed bitwise)
  np.testing.assert_allclose(objectives.predict(model, some), whole, rtol=1e-5, atol=1e-7)
  monkeypatch.setattr(objectives, 'EVAL_BATCH_BYTES', 1 << 27)
  batches = []
  predict = tf.keras.Model.predict
  monkeypatch.setattr(tf.keras.Model, 'predict', lambda self, x, batch_size, **kw: (
      batches.append(batch_size), predict(self, x, batch_size=batch_size, **kw))[1])
  objectives.predict(model, part)
  objectives.predict(short_model, short.objective.parts['test'])
  assert batches[0] == objectives.EVAL_BATCH_BYTES // costs[0] < 1000
  assert batches[-1] == min(objectives.EVAL_BATCH_SIZE, objectives.EVAL_BATCH_BYTES // costs[1])


def test_central_sgd_epochs_of_fixed_steps_lower_the_train_loss(lr_task):
  seen = []
  final = lr_task.train_centralized(optimizers.OptimizerConfig('sgd', 0.5), epochs=4,
                                    eval_every=2, steps_per_epoch=5,
                                    on_epoch=lambda e, m: seen.append(m))
  assert [('eval/train_loss' in m) for m in seen] == [False, True, False, True]
  assert final['eval/train_loss'] < np.log(2) - 0.005


def test_users_with_no_training_example_are_skipped_and_counted(ml100k_dir):
  task = task_lib.Task(task_lib.Config(data_dir=str(ml100k_dir), split='random',
                                       test_fraction=0.97, seed=1))
  assert task.clients_without_train > 0
  assert len(task.train_client_ids) == 30 - task.clients_without_train
  assert f'{task.clients_without_train} users with no training example skipped' in (
      task.describe())


def test_din_on_a_ctr_file_embeds_the_item_and_its_history_in_one_table(tmp_path):
  path = tmp_path / 'clicks.csv'
  path.write_text('label,user,item,history\n1,u1,a,\n1,u1,b,a\n1,u2,c,"a,b"\n0,u2,a,c\n')
  task = task_lib.Task(task_lib.Config(
      data_dir=str(path), model='din', client_column='user', feature_columns=('user', 'item'),
      list_columns=('history',), test_fraction=0.5))
  (items,) = [t for t in task.tables if t.name == 'item']
  assert items.features == ('item', 'history') and items.rows == 4  # a b c + padding
  first, second = task.client_table_rows()['item']  # the training rows: each user's first
  assert sorted(first) == [1] and sorted(second) == [1, 2, 3]  # u2: c with history a, b


def test_a_ctr_file_without_a_header_is_read_by_the_columns_it_is_given(tmp_path):
  """The issue's case: an Amazon export of label, user, item, history lines, no header."""
  rows = '1,u1,a,\n1,u1,b,a\n1,u2,c,"a,b"\n0,u2,a,c\n'
  (tmp_path / 'headed.csv').write_text('label,user,item,history\n' + rows)
  (tmp_path / 'bare.csv').write_text(rows)
  declared = dict(model='din', client_column='user', feature_columns=('user', 'item'),
                  list_columns=('history',), test_fraction=0.5)
  headed, bare = (task_lib.read_examples(task_lib.make_config(
      data_dir=str(tmp_path / name), **declared, **extra))[0]
                  for name, extra in [('headed.csv', {}), ('bare.csv', dict(
                      columns=['label', 'user', 'item', 'history']))])
  _same_examples(headed, bare)
  with pytest.raises(ValueError, match='--user_column, --item_column declare an interactions '
                     'file, and --client_column a CTR file: leave out --user_column and '
                     '--item_column'):
    task_lib.read_examples(task_lib.make_config(
        data_dir=str(tmp_path / 'bare.csv'), user_column='user', item_column='item',
        **declared))


def test_item_baselines_score_by_training_clicks_and_click_rate(tmp_path):
  """Training: a clicked 1 of 4, b 8 of 10, c 1 of 1; test: b+, c+, c-, a-. Scoring
  by how often an item was shown, by its unsmoothed rate (c 1.0 > b 0.8, where
  smoothing puts b 0.75 above c 0.67) or counting the test rows would each give
  other values."""
  training = [('a', 1)] + [('a', 0)] * 3 + [('b', 1)] * 8 + [('b', 0)] * 2 + [('c', 1)]
  path = tmp_path / 'clicks.csv'
  path.write_text('label,user,item,test\n' + ''.join(
      f'{label},u{k},{item},0\n' for k, (item, label) in enumerate(training))
                  + '1,u0,b,1\n1,u1,c,1\n0,u2,c,1\n0,u3,a,1\n')
  task = task_lib.Task(task_lib.Config(data_dir=str(path), client_column='user',
                                       feature_columns=('item',), test_column='test'))
  popularity, click_rate = task.objective.item_baselines('item')
  assert popularity == 0.75  # clicks b 8 > c 1 = a 1: b+ wins both, c+ ties both
  assert click_rate == 0.875  # smoothed b 0.75 > c 0.67 > a 0.33: c+ ties c- only
  # The floors, by the names runs report; the constant predictor at the training
  # click rate (10 of 15): its logloss is that rate's entropy on training, and on test
  # (2 clicks of 4) -(log(2/3) + log(1/3)) / 2.
  floors = task.floors()
  assert floors['popularity'] == {'eval/test_auc': 0.75}
  assert floors['click_rate'] == {'eval/test_auc': 0.875}
  rate = 10 / 15
  assert floors['constant'] == {
      'eval/test_auc': 0.5,
      'eval/train_loss': pytest.approx(-(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))),
      'eval/test_logloss': pytest.approx(-(np.log(rate) + np.log(1 - rate)) / 2)}
  with pytest.raises(ValueError, match="name it \\(floor_item\\), got 'user'"):
    task.floors('user')


def _same_examples(a, b) -> None:
  for name in a.features:
    np.testing.assert_array_equal(a.features[name], b.features[name], err_msg=name)
  for field in ('labels', 'clients', 'is_test', 'user_ids'):
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
  assert a.vocab_sizes == b.vocab_sizes


def test_interactions_become_the_clicks_of_the_ctr_file_sequence_clicks_writes(tmp_path):
  """A sequence file, and an interactions file of the same interactions, give the
  examples of the CTR file launch.sequence_clicks writes of them: DIN's clicks."""
  # Users in id order, as the interactions reader gives them (non-clicks are drawn
  # user after user).
  sequences = {3: [5, 16, 7, 8], 4: [2, 9, 5, 1, 16], 7: [8], 12: [1, 2, 3]}
  (tmp_path / 'seq.txt').write_text(
      ''.join(f'{u} {" ".join(map(str, items))}\n' for u, items in sequences.items()))
  pairs = [(u, item, 100 - k) for u, items in sequences.items()  # times run backwards
           for k, item in enumerate(reversed(items))]
  (tmp_path / 'export.csv').write_text(  # rows not in time order
      'user,item,time\n' + ''.join(f'{u},{i},{t}\n' for u, i, t in pairs))
  rows = sequence_clicks.din_rows(item_lists.Sequences.of(sequences), history_length=2, seed=5)
  rows.to_csv(tmp_path / 'clicks.csv', index=False)
  columns = sequence_clicks.CTR_COLUMNS
  from_file = task_lib.read_examples(task_lib.make_config(
      data_dir=str(tmp_path / 'clicks.csv'), model='din', seed=5,
      client_column=columns.client, feature_columns=columns.features,
      list_columns=columns.list_features, test_column=columns.test))[0]
  assert from_file.labels.sum() == 9 and from_file.is_test.sum() == 6  # 3 + 2 + 4 clicks
  for data_dir, declared in [('seq.txt', {}), ('export.csv', dict(
      user_column='user', item_column='item', time_column='time'))]:
    examples, spec = task_lib.read_examples(task_lib.make_config(
        data_dir=str(tmp_path / data_dir), model='din', history_length=2, seed=5, **declared))
    _same_examples(examples, from_file)
    assert spec.tables['item'] == ('item', 'history')


def test_a_csv_with_no_columns_declared_is_refused_naming_both_kinds_of_columns(tmp_path):
  (tmp_path / 'export.csv').write_text('user,item\n1,2\n')
  with pytest.raises(ValueError, match='--client_column.*--user_column and --item_column'):
    task_lib.read_examples(task_lib.make_config(data_dir=str(tmp_path / 'export.csv')))
  with pytest.raises(ValueError) as refused:  # declared: its own error, no CTR hint
    task_lib.read_examples(task_lib.make_config(data_dir=str(tmp_path / 'export.csv'),
                                                user_column='user', item_column='itm'))
  assert "no column 'itm' (item_column)" in str(refused.value)
  assert 'CTR file' not in str(refused.value)


def test_a_ctr_file_is_named_by_its_folder_unless_the_folder_holds_several(tmp_path):
  (tmp_path / 'data').mkdir()
  (tmp_path / 'data' / 'clicks.tsv').write_text('label\tuser\titem\n1\tu1\ta\n0\tu1\tb\n'
                                                '1\tu2\tb\n0\tu2\ta\n')
  columns = dict(client_column='user', feature_columns=('item',), test_fraction=0.5)
  by_file, by_folder = (task_lib.read_examples(task_lib.make_config(data_dir=str(d), **columns))[0]
                        for d in (tmp_path / 'data' / 'clicks.tsv', tmp_path / 'data'))
  _same_examples(by_file, by_folder)
  (tmp_path / 'data' / 'more.csv').write_text('label,user,item\n1,u1,a\n')
  with pytest.raises(ValueError, match='expected one CTR file .*found clicks.tsv, more.csv'):
    task_lib.read_examples(task_lib.make_config(data_dir=str(tmp_path / 'data'), **columns))


@pytest.mark.parametrize('rows, settings, message', [
    ('1,u1,a,0\n0,u1,b,0\n1,u2,a,0\n0,u2,b,0\n', {}, 'clicks.csv: no test example'),
    ('1,u1,a,0\n0,u1,b,0\n1,u2,a,1\n1,u2,b,1\n', {},
     'every test example is a click (a label > 0 is a click): AUC needs both'),
    ('5,u1,a,0\n3,u1,b,0\n4,u2,a,1\n2,u2,b,1\n', {}, 'every test example is a click'),
    ('1,u1,a,0\n0,u1,b,0\n1,u2,a,1\n0,u2,b,1\n', dict(split='random'),
     'test_column (test) marks the test examples: split and test_fraction do not apply'),
])
def test_test_parts_auc_cannot_score_and_unused_split_settings_are_refused(
    tmp_path, rows, settings, message):
  path = tmp_path / 'clicks.csv'
  path.write_text('label,user,item,test\n' + rows)
  with pytest.raises(ValueError, match=re.escape(message)):
    task_lib.Task(task_lib.make_config(data_dir=str(path), client_column='user',
                                       feature_columns=('item',), test_column='test',
                                       **settings))


@pytest.mark.parametrize('settings, message', [
    (dict(model='lr', embedding_dim=4), 'embedding_dim applies to the models with embeddings'),
    (dict(model='dcn', history_length=3), "history_length applies to DIN's history"),
    (dict(model='din', history_length=3, client_column='user'),
     "a CTR file's history is its list columns"),
])
def test_settings_a_model_or_file_does_not_use_are_refused(settings, message):
  with pytest.raises(ValueError, match=message):
    task_lib.Config(**settings)
  task_lib.Config(**{**settings, 'model': 'din', 'client_column': None})  # where it applies


def test_a_list_separator_without_list_columns_is_refused():
  with pytest.raises(ValueError, match="list_separator applies to a CTR file's list_columns"):
    task_lib.Config(client_column='user', feature_columns=('item',), list_separator='|')
  task_lib.Config(client_column='user', list_columns=('history',), list_separator='|')


def test_dins_clicks_of_a_sequence_file_refuse_a_split_and_say_which_rows_are_test(tmp_path):
  path = tmp_path / 'seq.txt'
  path.write_text('1 1 2 3 4\n2 2 3 4 5\n3 3 4 5 1\n')
  with pytest.raises(ValueError, match="DIN's clicks .* split and test_fraction do not apply"):
    task_lib.Task(task_lib.make_config(data_dir=str(path), model='din', test_fraction=0.5))
  task = task_lib.Task(task_lib.make_config(data_dir=str(path), model='din'))
  assert "6 test examples (each user's last click and non-click)" in task.describe()
