"""Which script rebuilds each committed results folder from its records, and how a
rebuilt folder is compared with the committed one (launch.rebuild_tables runs them)."""

import dataclasses
import filecmp
import pathlib

from experiments import papers

_BEAUTY_NEXT_ITEM = ('--data_dir=../shared/data/amazon-beauty', '--nodrop_remainder',
                     '--splits=by_user', '--probes=')


# Where a reproduction script reads its records and writes its tables.
REPRODUCTION_PLACES = ('--runs_dir={runs}', '--results_dir={results}')
STUDY_PLACE = ('--output_dir={results}',)  # a study's folder holds its records and tables
PAPERS = pathlib.Path(papers.__file__).parent  # the papers' study files, wherever run from


@dataclasses.dataclass(frozen=True)
class Rebuild:
  folder: str  # under results/
  module: str
  args: tuple[str, ...] = ()
  # The flags that place its records and tables: {runs} and {results} (the folder
  # rebuilt) filled in.
  places: tuple[str, ...] = REPRODUCTION_PLACES


# Each results folder's rebuild: the command its README gives, with --only=none.
REBUILDS = (
    Rebuild('fedsubavg_movielens', 'launch.study',
            (f'--spec={PAPERS / "fedsubavg_movielens.toml"}',), places=STUDY_PLACE),
    Rebuild('fedsubavg_amazon_beauty', 'launch.reproduce_fedsubavg', ('--dataset=beauty',)),
    Rebuild('metaua_movielens', 'launch.reproduce_metaua'),
    Rebuild('metaua_amazon_beauty', 'launch.reproduce_metaua', ('--dataset=beauty',)),
    Rebuild('colr_movielens', 'launch.study', (f'--spec={PAPERS / "colr_movielens.toml"}',),
            places=STUDY_PLACE),
    Rebuild('colr_amazon_beauty', 'launch.study', (f'--spec={PAPERS / "colr_beauty.toml"}',),
            places=STUDY_PLACE),
    Rebuild('fair_goodreads', 'launch.reproduce_fair'),
    Rebuild('fair_amazon_beauty', 'launch.reproduce_fair_beauty'),
    Rebuild('scale_amazon_beauty', 'launch.reproduce_scale'),
    Rebuild('combinations', 'launch.reproduce_combinations', ('--tables=goodreads',)),
    Rebuild('combinations', 'launch.reproduce_combinations', ('--tables=movielens',)),
    Rebuild('dual_encoder_ml100k', 'launch.reproduce_dual_encoder'),
    Rebuild('dual_encoder_beauty', 'launch.reproduce_dual_encoder',
            (*_BEAUTY_NEXT_ITEM, '--rounds=100', '--epochs=3')),
    Rebuild('dual_encoder_beauty_10epochs', 'launch.reproduce_dual_encoder',
            (*_BEAUTY_NEXT_ITEM, '--losses=global_softmax', '--rounds=100', '--epochs=10',
             '--norate_check', '--shared_records=results/dual_encoder_beauty')),
    Rebuild('dual_encoder_beauty_200rounds', 'launch.reproduce_dual_encoder',
            (*_BEAUTY_NEXT_ITEM, '--losses=global_softmax,batch_softmax_spreadout',
             '--rounds=200', '--epochs=10', '--norate_check',
             '--shared_records=results/dual_encoder_beauty_10epochs')),
    Rebuild('matrix', 'launch.matrix', ('--rounds=2',),
            places=('--records={results}/cells', '--output={results}/table.md')),
)


def differing(committed: pathlib.Path, rebuilt: pathlib.Path) -> list[str]:
  """Files of either folder (recursively) that the other lacks or holds otherwise
  (a rewritten file's bytes are compared: its time differs)."""
  differing = []

  def walk(compared: filecmp.dircmp, prefix: str) -> None:
    differing.extend(prefix + name for name in
                     (*compared.left_only, *compared.right_only, *compared.diff_files,
                      *compared.funny_files))
    for name, sub in compared.subdirs.items():
      walk(sub, f'{prefix}{name}/')

  filecmp.clear_cache()
  walk(filecmp.dircmp(committed, rebuilt, ignore=[]), '')
  return sorted(differing)
