"""Every registered algorithm (less those that are another's build with other
settings: BUILT says which), on every task it applies to, with every aggregator
it declares (under DP, with FedSubAvg stacked where it declares that): the
aggregator is in the built process (its measurements in what a round reports,
TFF's DP query in its state), and the registry's own check of a build passes,
so no declared setting is a label only. What it does not declare, the registry refuses
(test_registry.py); that a run's metrics show it, test_train.py."""

import dataclasses

import pytest
import tensorflow_federated as tff

from tasks import loo_ranking
from tasks import ranking
from tff_rec import composer
from tff_rec import registry
from tff_rec.aggregators import inner
from tff_rec.algorithms import fair

# What each aggregator puts in a round's measurements, and in its state.
SHOWN = {'secure': ('secure_upper_threshold', None), 'dp': ('dp_clip', 'l2_norm_clip')}


def _names(type_spec) -> set[str]:
  """Every field name anywhere in a (federated, nested) TFF type."""
  if isinstance(type_spec, tff.FederatedType):
    return _names(type_spec.member)
  if isinstance(type_spec, tff.StructType):
    names = set()
    for name, member in tff.structure.iter_elements(type_spec):
      names |= {name} | _names(member) if name else _names(member)
    return names
  return set()


def _shown(process) -> tuple[set[str], set[str]]:
  """(names in what a round reports of its aggregation, names in the aggregation's state)."""
  if isinstance(process, composer.RoundProcess):
    aggregation = process.round.aggregation_process()
    return (_names(aggregation.next.type_signature.result.measurements),
            _names(aggregation.initialize.type_signature.result))
  return (_names(process.next.type_signature.result.metrics),
          _names(process.initialize.type_signature.result))


def _task(kind: str, ranking_dir, user_items_dir):
  """A task whose model is of `kind`, small (tables of 100+ rows, so FAIR and the
  table forms apply): loo_ranking's MF is a Keras MF too, its batches numpy arrays."""
  if kind == 'weight_tables':
    return ranking.Task(ranking.Config(data_dir=str(user_items_dir)))
  return loo_ranking.Task(loo_ranking.Config(data_dir=str(ranking_dir), embedding_dim=4))


# Each builder of the registry's table (a kind of model) with each aggregator, on a
# task of that kind; FedMF's round with stored and with reconstructed users. One
# case per kind and aggregator: the cases spread over the test processes.
@pytest.mark.slow(seconds=27)
@pytest.mark.parametrize('aggregator', ['secure', 'dp'])
@pytest.mark.parametrize('kind', ['keras', 'keras_batches', 'weight_tables', 'mf:stored',
                                  'mf:reconstructed'])
def test_every_declared_aggregator_is_in_every_built_process(kind, aggregator, ranking_dir,
                                                             user_items_dir):
  task = _task(kind, ranking_dir, user_items_dir)
  built = []
  for name, algorithm in registry.algorithms().items():
    builder = registry.builders_of(name).get(kind.split(':')[0])
    if algorithm.base and not algorithm.applies:  # its base's build, other server or step
      continue
    if name in fair.FAMILY and name != 'fair':  # FAIR's round with other tiers
      continue
    if aggregator in algorithm.aggregators and builder is not None:
      sgd = {} if 'client_optimizer' in algorithm.unused_settings else {
          'client_optimizer': 'sgd'}  # FedSGD's clients have none
      # Under DP, FedSubAvg's correction stacked where declared: both in one build.
      stack = ('fedsubavg',) if aggregator == 'dp' and 'fedsubavg' in algorithm.stacks else ()
      # FedMF's users reconstructed where its options say so (fedmf and its forms;
      # FedAvg on the MF is FedMF's round with stored users)
      takes = {f.name for f in dataclasses.fields(algorithm.options)}
      users = ({'user_state': 'reconstructed'} if kind == 'mf:reconstructed'
               and 'user_state' in takes else {})
      training = dataclasses.replace(registry.training(
          task, name, aggregator=inner.InnerAggregator(aggregator), **sgd, stack=stack,
          server_optimizer=algorithm.server_optimizer or 'sgd'), runtime='inprocess')
      try:
        options, training = registry.applied(name, training, **users)  # as build does
        training = registry.composed_training(name, kind.split(':')[0], task, options,
                                              training)
        made = builder(task, options, training, name=name)
        made = dataclasses.replace(
            made, process=composer.build_process(made.process, task, training, name))
      except registry.NotApplicable as e:  # DP needs a cohort mean
        assert 'scolr' in str(e) and aggregator == 'dp', (name, str(e))
        continue
      registry.check_honoured(name, training, made)  # as registry.build does
      measured, state = _shown(made.process)
      in_measurements, in_state = SHOWN[aggregator]
      assert in_measurements in measured, (kind, name, aggregator)
      assert in_state is None or in_state in state, (kind, name, aggregator)
      built.append(name)
  assert len(built) >= BUILT[kind, aggregator], built


# How many algorithms declare each aggregator on each kind of model, at least (DP
# on the table forms has one fewer: scolr needs a cohort mean), less the variants
# that run their base's build with another server or client step (fedadam,
# fedadagrad, fedprox) and FAIR's baselines (its round with other tiers: fair_hom,
# full_trn, fedhm, fair_inconsistent).
BUILT = {('keras', 'secure'): 8, ('keras', 'dp'): 7, ('keras_batches', 'secure'): 3,
         ('keras_batches', 'dp'): 3, ('weight_tables', 'secure'): 7,
         ('weight_tables', 'dp'): 6, ('mf:stored', 'secure'): 7, ('mf:stored', 'dp'): 6,
         ('mf:reconstructed', 'secure'): 7, ('mf:reconstructed', 'dp'): 6}
