"""A study file: read whole and refused, naming the file and the field, before any
cell runs."""

import pytest

from experiments import study_file

STUDY = '''
rounds = 20
eval_every = 5
seeds = [0, 1]
baseline = "fedavg"
floors = ["click_rate"]

[task]
name = "ctr"
data_dir = "clicks.csv"
client_column = "user"
feature_columns = ["item"]
validation_fraction = 0.1

[selection]
metric = "eval/validation_auc"
last = 2

[report]
metrics = ["eval/test_auc"]

[methods.fedavg]
algorithm = "fedavg"
grid = { client_learning_rate = [0.1, 0.3] }

[methods.prox]
algorithm = "fedprox"
options = { proximal_strength = 0.1 }
settings = { clients_per_round = 5 }
grid = { client_learning_rate = [0.1, 0.3], local_epochs = [1, 2] }
'''


def _load(tmp_path, text=STUDY, **overrides):
  path = tmp_path / 'study.toml'
  path.write_text(text)
  return study_file.load(path, overrides)


def test_a_study_resolves_each_cell_as_the_trainer_would(tmp_path):
  study = _load(tmp_path)
  assert study.task == 'ctr' and study.seeds == (0, 1) and study.floors == ('click_rate',)
  prox = study.methods['prox']
  assert len(prox.points()) == 4
  spec = study.spec('prox', {'client_learning_rate': 0.3, 'local_epochs': 2}, 1)
  assert spec.settings == {'clients_per_round': 5, 'client_learning_rate': 0.3}
  assert spec.options == {'proximal_strength': 0.1}
  assert spec.task_settings['local_epochs'] == 2 and spec.task_settings['seed'] == 1
  assert (spec.rounds, spec.eval_every) == (20, 5)


def test_a_method_may_have_its_own_schedule_and_selection_and_be_centralized(tmp_path):
  study = _load(tmp_path, STUDY.replace('[methods.prox]', """[methods.central]
algorithm = "central"
task = { batch_size = 8 }
settings = { optimizer = "sgd" }
grid = { learning_rate = [0.1, 1.0] }
rounds = 6
seeds = [0]
selection = { metric = "eval/train_loss", goal = "min", last = 1, rounds = 3 }

[methods.prox]"""))
  central = study.methods['central']
  assert (central.rounds, central.eval_every, central.seeds) == (6, 5, (0,))
  assert (central.selection.metric, central.selection.goal, central.selection.rounds,
          central.selection.extend) == ('eval/train_loss', 'min', 3, 2)  # extend: the study's
  assert study.methods['fedavg'].selection == study.selection
  spec = study.spec('central', {'learning_rate': 1.0}, 0, grid=True)
  assert (spec.module, spec.rounds, spec.eval_every) == ('launch.centralized', 3, 3)
  assert spec.settings == {'optimizer': 'sgd', 'learning_rate': 1.0}
  assert spec.task_settings['batch_size'] == 8
  assert study.spec('central', {'learning_rate': 1.0}, 0).rounds == 6


def test_overrides_set_dotted_fields_as_toml_values(tmp_path):
  study = _load(tmp_path, **{'rounds': 10, 'seeds': [3],
                             'methods.fedavg.grid.client_learning_rate': [0.5]})
  assert (study.rounds, study.seeds) == (10, (3,))
  assert study.methods['fedavg'].grid == {'client_learning_rate': (0.5,)}
  assert study_file.parse_value('[0.1, 0.3]') == [0.1, 0.3]
  assert study_file.parse_value('sgd') == 'sgd'  # a bare word is a string


@pytest.mark.parametrize('change, field, message', [
    (('name = "ctr"', 'name = "tennis"'), 'task.name', "unknown task 'tennis'"),
    (('algorithm = "fedavg"', 'algorithm = "fedavgg"'), 'methods.fedavg.algorithm',
     "unknown algorithm 'fedavgg'"),
    (('proximal_strength = 0.1', 'proximal = 0.1'), 'methods.prox.options.proximal',
     'not an option of fedprox'),
    (('clients_per_round = 5', 'clients = 5'), 'methods.prox.settings.clients',
     'not a training setting'),
    (('grid = { client_learning_rate = [0.1, 0.3] }\n\n[methods.prox]',
      'grid = { proximal_strength = [0.1, 0.3] }\n\n[methods.prox]'),
     'methods.fedavg.grid.proximal_strength', 'fedavg on task ctr takes no setting'),
    (('local_epochs = [1, 2]', 'local_epochs = []'), 'methods.prox.grid.local_epochs',
     'a non-empty list'),
    (('seeds = [0, 1]', 'seeds = []'), 'seeds', 'one or more distinct seeds'),
    (('metric = "eval/validation_auc"', 'metric = "eval/test_auc"'), 'selection.metric',
     'a test metric'),
    (('metric = "eval/validation_auc"', 'metric = "test/hr_at_10"'), 'selection.metric',
     'a test metric'),
    (('floors = ["click_rate"]', 'floors = ["popularity", "oracle"]'), 'floors',
     "'oracle' is not a floor of task ctr"),
    (('baseline = "fedavg"', 'baseline = "fedsgd"'), 'baseline', 'not one of the methods'),
    (('last = 2', 'last = 9'), 'selection.last', 'evaluated every 5 has 4'),
    (('data_dir = "clicks.csv"', 'data_dir = "clicks.csv"\nbatch = 3'), 'task.batch',
     'not a setting of task ctr'),
    (('proximal_strength = 0.1', 'proximal_strength = -1.0'), 'methods.prox',
     'proximal_strength must be >= 0'),
    (('rounds = 20', 'color = "red"\nrounds = 20'), 'color', 'not a study field'),
    (('metrics = ["eval/test_auc"]', 'metrics = ["eval/test_auc"]\nstyle = "wide"'),
     'report.style', 'not a report field'),
    (('metrics = ["eval/test_auc"]', 'metrics = ["eval/test_auc"]\nrenderer = "no.such"'),
     'report.renderer', 'no.such could not be imported'),
    (('metrics = ["eval/test_auc"]', 'metrics = ["eval/test_auc"]\nrenderer = "json"'),
     'report.renderer', 'json has no render(study, folder, plan, task)'),
    (('settings = { clients_per_round = 5 }\ngrid', 'choice_of = "fedavg"\ngrid'),
     'methods.prox.grid', "runs at 'fedavg'\'s choice has no grid"),
    (('[methods.prox]', '[methods.secure]\nalgorithm = "fedavg"\nchoice_of = "sgd"\n\n'
      '[methods.prox]'), 'methods.secure.choice_of', "'sgd' is not a method that chooses"),
    (('[methods.prox]', '[methods.central]\nalgorithm = "central"\nstack = ["fedsubavg"]\n\n'
      '[methods.prox]'), 'methods.central.stack', 'the centralized baseline has no options'),
    (('[methods.prox]', '[methods.central]\nalgorithm = "central"\n'
      'settings = { clients_per_round = 5 }\n\n[methods.prox]'),
     'methods.central.settings.clients_per_round', 'not a training setting of central'),
    (('settings = { clients_per_round = 5 }', 'selection = { metric = "eval/test_logloss" }'),
     'methods.prox.selection.metric', 'a test metric'),
    (('last = 2', 'last = 2\nrounds = 20'), 'selection.rounds',
     "the grid's runs must be shorter than the 20 rounds"),
    (('last = 2', 'last = 2\nrounds = 10'), 'selection.last', 'last must be 1, got 2'),
    (('settings = { clients_per_round = 5 }', 'seeds = [1, 1]'), 'methods.prox.seeds',
     'distinct seeds'),
    (('[methods.prox]', '[methods.a]\nalgorithm = "fedavg"\nchoice_of = "fedavg"\n\n'
      '[methods.b]\nalgorithm = "fedavg"\nchoice_of = "a"\n\n[methods.prox]'),
     'methods.b.choice_of', "'a' is not a method that chooses its own settings"),
])
def test_bad_fields_are_refused_naming_the_file_and_field(tmp_path, change, field, message):
  with pytest.raises(study_file.StudyError) as refused:
    _load(tmp_path, STUDY.replace(*change))
  assert str(refused.value).startswith(f'{tmp_path / "study.toml"}: {field}: ')
  assert message in str(refused.value)


def test_a_toml_syntax_error_names_its_line(tmp_path):
  with pytest.raises(study_file.StudyError, match=r'study.toml: not TOML: .*line 3'):
    _load(tmp_path, 'rounds = 2\n[task]\nname = = "ctr"\n')


def test_a_floor_item_is_refused_where_the_tasks_floors_score_none(tmp_path):
  """ctr's item floors score the column floor_item names; a ranking task's score no
  column, and the launcher used to drop the field unread."""
  text = STUDY.replace('floors = ["click_rate"]', 'floors = ["popularity"]\nfloor_item = "item"')
  assert _load(tmp_path, text).floor_item == 'item'
  ranking = text.replace(
      'client_column = "user"\nfeature_columns = ["item"]\nvalidation_fraction = 0.1\n',
      '').replace('name = "ctr"', 'name = "loo_ranking"')
  with pytest.raises(study_file.StudyError, match="study.toml: floor_item: task loo_ranking's "
                     'floors score no item column: leave it out'):
    _load(tmp_path, ranking)
